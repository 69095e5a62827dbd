// Every frame accounted for, with real ffmpeg: a recording that ends early leaves drops for
// the frames it owed, an fps above the source's rate is capped, a refused server is
// "unavailable", and a data directory that cannot be made fails at once, naming itself.
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDeployment } from '../../cli/deployment.js';
import { compileDeployment, createMemoryBus, deploymentSchema, ErrorCode, PanoptesError, projectRoot, silentLogger, sourceSchema, Topics, type Frame } from '../../core/index.js';
import { createFileSource, createIngest, MAX_ENDED_SOURCES, resolveFfmpegPath, type FileSourceOptions } from '../../ingest/index.js';
import { waitFor } from '../conformance/wait-for.js';
import { capturingLogger } from '../helpers.js';

const root = projectRoot();
let dir: string;
const clips = { whole: '', cutMp4: '', cutMkv: '', oneSecond: '', damaged: '' };

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'panoptes-accounting-'));
  const ffmpeg = resolveFfmpegPath();
  const encode = (file: string, seconds: number, extra: string[] = []): string => {
    const path = join(dir, file);
    execFileSync(ffmpeg, [
      '-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=25', '-t', String(seconds),
      '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', ...extra, path,
    ]);
    return path;
  };
  // 10 s at 25 fps, index first (faststart): the first 30% of its bytes is the first ~3 s.
  clips.whole = encode('whole.mp4', 10, ['-movflags', '+faststart']);
  clips.cutMp4 = join(dir, 'cut.mp4');
  const whole = readFileSync(clips.whole);
  writeFileSync(clips.cutMp4, whole.subarray(0, Math.floor(whole.length * 0.3))); // head -c 30%
  // Matroska cut with truncate(1): its header still says 10 s.
  clips.cutMkv = join(dir, 'cut.mkv');
  copyFileSync(encode('whole.mkv', 10), clips.cutMkv);
  truncateSync(clips.cutMkv, Math.floor(statSync(clips.cutMkv).size * 0.4));
  clips.oneSecond = encode('one.mp4', 1);
  // 20 s at 25 fps with the middle 40% of its bytes zeroed: seconds of pictures ffmpeg cannot decode.
  const damaged = readFileSync(encode('to-damage.mp4', 20));
  damaged.fill(0, Math.floor(damaged.length * 0.3), Math.floor(damaged.length * 0.7));
  clips.damaged = join(dir, 'damaged.mp4');
  writeFileSync(clips.damaged, damaged);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));


async function readAll(options: Partial<FileSourceOptions> & { path: string }): Promise<{ frames: Frame[]; source: ReturnType<typeof createFileSource> }> {
  const source = createFileSource({ id: 'cam', speed: 'max', loop: false, ...options });
  const frames: Frame[] = [];
  for await (const frame of source.frames()) frames.push(frame);
  return { frames, source };
}

describe('a recording that ends early', () => {
  it('the first 30% of a faststart mp4: ffmpeg exits 0 after ~3 s, and the source says 10 s were owed', async () => {
    const { logger, warnings } = capturingLogger();
    const { frames, source } = await readAll({ path: clips.cutMp4, logger });
    const { shortfall, expectedFrames, state } = source.status();
    expect(state).toBe('ended'); // not a failure: what was there is analyzed
    expect(expectedFrames).toBe(250);
    expect(frames.length).toBeGreaterThan(50);
    expect(frames.length).toBeLessThan(125);
    expect(shortfall).toMatchObject({ expected: 250, delivered: frames.length, missing: 250 - frames.length, durationMs: 10_000 });
    expect(warnings).toEqual([expect.stringMatching(new RegExp(`ends early: .* ${frames.length} of 250 frames delivered, ${250 - frames.length} missing \\(frame_seq ${frames.length}\\.\\.249\\)`))]);
  });

  it('an mkv cut with truncate, sampled at 2 fps: the missing frames are sampled frames', async () => {
    const { frames, source } = await readAll({ path: clips.cutMkv, fps: 2 });
    expect(source.status().shortfall).toMatchObject({ expected: 20, delivered: frames.length, missing: 20 - frames.length });
    expect(frames.length).toBeLessThan(10);
  });

  it('a whole clip owes nothing', async () => {
    const { logger, warnings } = capturingLogger();
    const { frames, source } = await readAll({ path: clips.whole, fps: 2, logger });
    expect(frames).toHaveLength(20);
    expect(source.status().shortfall).toBeUndefined();
    expect(warnings).toEqual([]);
  });

  it('through the pipeline: exit as usual, drops in the summary, and every owed frame_seq in frames or drops (the SQL proof)', async () => {
    const dataDir = join(dir, 'data-pipeline');
    const deployment = deploymentSchema.parse({ apps: ['apps/traffic.yaml'], sources: [{ id: 'cut', path: clips.cutMp4, apps: ['traffic'], speed: 'max', fps: 2 }] });
    const config = compileDeployment(deployment, join(root, 'configs/test.yaml'), { dataDir });
    let proof: Record<string, unknown> | undefined;
    let drops: Record<string, unknown>[] = [];
    const summary = await runDeployment(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        // docs/ingest.md: for a source whose sampling is countable, frame_seq 0 .. expected-1 each appear once.
        proof = (await sink.query(`
          SELECT uniqExact(seq) AS seen, min(seq) AS first, max(seq) AS last
          FROM (SELECT toInt64(frame_seq) AS seq FROM frames WHERE source = 'cut'
                UNION ALL SELECT frame_seq AS seq FROM drops WHERE source = 'cut' AND what = 'frame')`)).rows[0];
        drops = (await sink.query("SELECT stage, reason, frame_seq, detail FROM drops WHERE source = 'cut' ORDER BY frame_seq")).rows;
      },
    });
    const delivered = summary.sources[0]!.frames;
    expect(delivered).toBeGreaterThan(3);
    expect(delivered).toBeLessThan(10);
    expect(summary.sources[0]!.error).toBeUndefined();
    expect(summary.sources[0]!.missing).toEqual({ frames: 20 - delivered, detail: expect.stringContaining(`${delivered} of 20 frames delivered`) });
    expect(summary.drops).toBe(20 - delivered);
    expect(proof && Object.fromEntries(Object.entries(proof).map(([k, v]) => [k, Number(v)]))).toEqual({ seen: 20, first: 0, last: 19 });
    expect(drops).toHaveLength(20 - delivered);
    expect(drops.every((d) => d.stage === 'ingest' && d.reason === 'truncated')).toBe(true);
    expect(drops.map((d) => Number(d.frame_seq))).toEqual(Array.from({ length: 20 - delivered }, (_, i) => delivered + i));
  }, 120_000);
});

describe('a recording damaged in the middle', () => {
  it('sampled at 2 fps: the fps filter\'s copies of the last good picture are drops, not frames, and every frame_seq is one or the other', async () => {
    const { logger, warnings } = capturingLogger();
    const { frames, source } = await readAll({ path: clips.damaged, fps: 2, logger });
    const damaged = source.takeDamaged();
    expect(damaged.length).toBeGreaterThan(5);
    const seqs = [...frames.map((f) => f.seq), ...damaged.map((d) => d.seq)].sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: 40 }, (_, i) => i));
    // No frame comes from the damaged stretch.
    const [from, to] = [damaged[0]!.ptsMs, damaged.at(-1)!.ptsMs];
    expect(frames.filter((f) => f.ptsMs >= from && f.ptsMs <= to)).toEqual([]);
    expect(warnings.filter((w) => /could not decode/.test(w)).length).toBeGreaterThanOrEqual(1);
    // The same clip whole: nothing damaged.
    expect((await readAll({ path: clips.whole, fps: 2 })).source.takeDamaged()).toEqual([]);
  });

  it('every frame sampled: the jump over the damage is drops too', async () => {
    const { frames, source } = await readAll({ path: clips.damaged });
    const damaged = source.takeDamaged();
    expect(damaged.length).toBeGreaterThan(0);
    const seqs = [...frames.map((f) => f.seq), ...damaged.map((d) => d.seq)].sort((a, b) => a - b);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(seqs.at(-1)).toBe(seqs.length - 1);
  });

  it('through the pipeline: the damage is drops (reason damaged) in the summary and in SQL, beside the frames', async () => {
    const dataDir = join(dir, 'data-damaged');
    const deployment = deploymentSchema.parse({ apps: ['apps/traffic.yaml'], sources: [{ id: 'hurt', path: clips.damaged, apps: ['traffic'], speed: 'max', fps: 2 }] });
    const config = compileDeployment(deployment, join(root, 'configs/test.yaml'), { dataDir });
    let seen: number[] = [];
    let reasons: string[] = [];
    const summary = await runDeployment(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        seen = (await sink.query(`SELECT seq FROM (SELECT toInt64(frame_seq) AS seq FROM frames WHERE source = 'hurt'
          UNION ALL SELECT frame_seq AS seq FROM drops WHERE source = 'hurt' AND what = 'frame') ORDER BY seq`)).rows.map((r) => Number(r.seq));
        reasons = (await sink.query("SELECT DISTINCT reason FROM drops WHERE source = 'hurt'")).rows.map((r) => String(r.reason));
      },
    });
    const { frames, missing } = summary.sources[0]!;
    expect(missing?.frames).toBe(40 - frames);
    expect(missing?.detail).toContain('samples of footage ffmpeg could not decode');
    expect(seen).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(reasons).toEqual(['damaged']);
  }, 120_000);
});

describe('fps above the source\'s own rate', () => {
  it('is capped to the native rate with a warning, instead of ffmpeg repeating frames', async () => {
    const { logger, warnings } = capturingLogger();
    const { frames, source } = await readAll({ path: clips.oneSecond, fps: 100, logger });
    expect(frames).toHaveLength(25); // not 100
    expect(frames.map((f) => f.ptsMs).slice(0, 3)).toEqual([0, 40, 80]);
    expect(source.status().fps).toBeUndefined();
    expect(source.status().shortfall).toBeUndefined();
    expect(warnings).toEqual(['fps 100 is above the source\'s own rate (25 fps): sampling every frame (25 fps) instead of repeating frames']);
  });

  it('at or below it, samples as asked', async () => {
    const { frames } = await readAll({ path: clips.oneSecond, fps: 25 });
    expect(frames).toHaveLength(25);
  });
});

describe('a network source whose server refuses the connection', () => {
  it('is SourceUnavailable (retriable), not a decode error', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve())); // now nothing listens there
    const url = `http://127.0.0.1:${port}/x.mp4`;
    const err = await readAll({ path: url }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(PanoptesError);
    expect(err).toMatchObject({ code: ErrorCode.SourceUnavailable, retriable: true, details: { source: 'cam', path: url, reason: 'Connection refused' } });
    expect((err as Error).message).toMatch(new RegExp(`^source cam \\(${url.replaceAll('.', '\\.')}\\): unavailable after 0 frames: Connection refused`));
  });
});

describe('a long-lived worker that sees sources come and go', () => {
  it(`keeps the figures of the last ${MAX_ENDED_SOURCES} ended sources, and every outcome for the summary`, async () => {
    const bus = createMemoryBus();
    const ingest = createIngest({ bus, dataDir: dir, logger: silentLogger() });
    const total = MAX_ENDED_SOURCES + 6;
    // Sources whose file is missing end at once, each with its error; one at a time, so that they
    // end in the order they were added (the file checks of sources added together end in any order).
    for (let i = 0; i < total; i++) {
      ingest.add(sourceSchema.parse({ id: `gone-${i}`, path: join(dir, `missing-${i}.mp4`), apps: ['traffic'] }));
      await ingest.idle();
    }
    const kept = ingest.metrics().map((m) => m.id);
    expect(kept).toHaveLength(MAX_ENDED_SOURCES);
    // The oldest went first.
    expect(kept).not.toContain('gone-5');
    expect(kept).toContain('gone-6');
    expect(kept).toContain(`gone-${total - 1}`);
    // One let go comes back under its id: it is running again, not listed twice.
    ingest.add(sourceSchema.parse({ id: 'gone-0', path: join(dir, 'missing-0.mp4'), apps: ['traffic'] }));
    await ingest.idle();
    const outcomes = await ingest.close();
    expect(outcomes).toHaveLength(total);
    expect(new Set(outcomes.map((o) => o.id)).size).toBe(total);
    expect(outcomes.every((o) => o.frames === 0 && /not found/.test(o.error ?? ''))).toBe(true);
    await bus.close();
  }, 120_000);
});

describe('a data directory that cannot be created', () => {
  const panoptes = async (...args: string[]): Promise<{ code: number; stderr: string; ms: number }> => {
    const started = Date.now();
    try {
      await promisify(execFile)(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), ...args], {
        cwd: root,
        env: { ...process.env, PANOPTES_LOG_LEVEL: 'silent' },
        timeout: 60_000,
      });
      return { code: 0, stderr: '', ms: Date.now() - started };
    } catch (err) {
      const e = err as { code?: number; stderr?: string };
      return { code: e.code ?? -1, stderr: e.stderr ?? '', ms: Date.now() - started };
    }
  };

  it('under /proc or under a regular file, a replay fails at once with one line naming the path', async () => {
    writeFileSync(join(dir, 'a-file'), 'x');
    const cases = [
      ['/proc/panoptes-data', /^panoptes: dataDir \/proc\/panoptes-data\/clickhouse: cannot create \/proc\/panoptes-data: ENOENT/],
      [join(dir, 'a-file/data'), new RegExp(`^panoptes: dataDir ${join(dir, 'a-file/data/clickhouse')}: cannot create a directory here: ${join(dir, 'a-file')} is a file`)],
    ] as const;
    const results = await Promise.all(cases.map(([dataDir]) => panoptes('replay', clips.oneSecond, '--app', 'traffic', '--data-dir', dataDir)));
    results.forEach((result, i) => {
      expect(result.code).toBe(1); // before: /proc spun at 100% CPU until killed
      expect(result.stderr).toMatch(cases[i]![1]);
      expect(result.ms).toBeLessThan(30_000);
    });
  }, 90_000);
});

describe('a replay in progress', () => {
  it('says how many frames it will publish in all, and when it expects to have', async () => {
    const bus = createMemoryBus();
    await bus.createTopics([Topics.frames, Topics.drops].map((name) => ({ name, partitions: 1 })));
    const ingest = createIngest({ bus, dataDir: dir, logger: silentLogger() });
    try {
      // 10 s at 25 fps, sampled at 5 fps and played in real time: 50 frames over 10 s.
      ingest.add(sourceSchema.parse({ id: 'replay', path: clips.whole, apps: ['traffic'], fps: 5, speed: 1 }));
      await waitFor(() => (ingest.metrics()[0]?.published ?? 0) >= 10, 'two seconds of frames', { timeoutMs: 10_000 });
      const [metrics] = ingest.metrics();
      expect(metrics!.expectedFrames).toBe(50);
      const finishAt = Date.parse(metrics!.expectedFinishAt!);
      // About 8 s of the 10 are left.
      expect(finishAt - Date.now()).toBeGreaterThan(5000);
      expect(finishAt - Date.now()).toBeLessThan(11_000);
    } finally {
      await ingest.close();
      await bus.close();
    }
  }, 30_000);
});
