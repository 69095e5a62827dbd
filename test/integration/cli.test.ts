import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';
import { freePort } from '../helpers.js';

const run = promisify(execFile);
const root = projectRoot();
const clip = join(root, '../shared/footage/person-bicycle-car-detection.gif');

/** Runs the real `panoptes` command from source; resolves with its output and exit code. */
async function panoptes(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), ...args], {
      cwd: root,
      env: { ...process.env, PANOPTES_LOG_LEVEL: 'silent' },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('panoptes command', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-cli-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it.skipIf(!existsSync(clip))('replays a clip, then answers a query as JSON', async () => {
    const replay = await panoptes('replay', clip, '--app', 'traffic', '--speed', 'max', '--data-dir', dataDir);
    expect(replay.stderr).not.toMatch(/error|fail/i);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toMatch(/frames: \d+ {2}detections: \d+/);

    const query = await panoptes('query', 'SELECT class, count() AS n FROM detections GROUP BY class ORDER BY class', '--format', 'json', '--data-dir', dataDir);
    expect(query.code).toBe(0);
    const rows = JSON.parse(query.stdout) as { class: string; n: number }[];
    expect(rows.map((r) => r.class)).toContain('person');
    expect(rows.every((r) => r.n > 0)).toBe(true);

    const saved = await panoptes('query', '--saved', 'traffic.objects_per_class', '--format', 'json', '--data-dir', dataDir);
    const byClass = (list: { class: string; n: number }[]): { class: string; n: number }[] => [...list].sort((a, b) => a.class.localeCompare(b.class));
    expect(byClass(JSON.parse(saved.stdout) as { class: string; n: number }[])).toEqual(byClass(rows)); // the same counts, by a saved name
    // An app outside configs/apps, given as a file.
    const lobby = await panoptes('query', '--saved', 'lobby.arrivals', '--app-file', join(root, 'docs/examples/lobby.yaml'), '--format', 'json', '--data-dir', dataDir);
    expect(lobby.stderr).toBe('');
    expect(JSON.parse(lobby.stdout)).toEqual([]);
    const unknown = await panoptes('query', '--saved', 'traffic.nope', '--data-dir', dataDir);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('traffic.objects_per_class');

    const csv = await panoptes('query', "SELECT 'a,b' AS x, 1 AS y", '--format', 'csv', '--data-dir', dataDir);
    expect(csv.stdout).toBe('x,y\n"a,b",1\n');

    const write = await panoptes('query', 'DROP TABLE detections', '--data-dir', dataDir);
    expect(write.code).toBe(1);
    expect(write.stderr).toMatch(/^panoptes: queries are read-only/);
  });

  it('fails with a one-line reason naming a missing file', async () => {
    const result = await panoptes('replay', join(dataDir, 'nope.mp4'), '--app', 'traffic', '--data-dir', dataDir);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^panoptes: no such file: \S+nope\.mp4/);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('names the key, line and value of a bad deployment', async () => {
    const file = join(dataDir, 'bad.yaml');
    writeFileSync(file, `apps: [${join(root, 'configs/apps/traffic.yaml')}]\nmodels: ${join(root, 'configs/models.yaml')}\nsources:\n  - id: cam\n    path: x.mp4\n    apps: [traffic]\n    fps: fast\n`);
    const result = await panoptes('run', file, '--data-dir', dataDir);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${file}:7: sources[0].fps: got "fast"; expected number`);

    // A node's params too, before any model loads.
    const appFile = join(dataDir, 'bad-params.yaml');
    writeFileSync(appFile, 'name: det\nsloMs: 1500\nnodes:\n  - { id: detect, model: centernet, params: { minScore: 3 } }\nedges:\n  - { from: frames, to: detect }\n');
    writeFileSync(file, `apps: [${appFile}]\nmodels: ${join(root, 'configs/models.yaml')}\nsources:\n  - { id: cam, path: x.mp4, apps: [det] }\n`);
    const check = await panoptes('config', 'check', file);
    expect(check.code).toBe(1);
    expect(check.stderr).toContain(`${appFile}:4: nodes[0].params.minScore: got 3; expected ≤ 1`);
  });

  it.skipIf(!existsSync(clip))('exits 1 when one source of several fails, naming it, with the others\' results stored', async () => {
    const file = join(dataDir, 'one-bad.yaml');
    writeFileSync(join(dataDir, 'broken.mp4'), 'not a video at all');
    const apps = `apps: [${join(root, 'bench/apps/detect.yaml')}]\nmodels: ${join(root, 'configs/models.yaml')}\n`;
    writeFileSync(file, `${apps}sources:\n  - { id: good, path: ${clip}, apps: [detect], fps: 2 }\n  - { id: broken, path: broken.mp4, apps: [detect] }\n`);
    const result = await panoptes('run', file, '--data-dir', join(dataDir, 'one-bad'));
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n').at(-1)).toMatch(/^panoptes: 1 of 2 sources failed \(the others ran to their end\): broken: /);
    expect(Number(/frames: (\d+) {2}/.exec(result.stdout)?.[1])).toBeGreaterThan(0);
  });

  it.skipIf(!existsSync(clip))('stops a looping replay cleanly on SIGINT: in-flight frames stored, summary printed', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), 'replay', clip, '--app', 'traffic', '--loop', '--speed', '1', '--data-dir', join(dataDir, 'loop')], {
      cwd: root,
      env: { ...process.env, PANOPTES_LOG_LEVEL: 'silent', PANOPTES_API_TOKEN: 'the-token-of-this-test' },
    });
    let stdout = '';
    let stderr = '';
    let interrupted = false;
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      // Progress lines come every 5 s off a terminal, the first at once with 0 frames; wait for one with frames.
      if (!interrupted && /replaying: [1-9]/.test(stderr)) interrupted = child.kill('SIGINT');
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    expect(stderr).toContain('stopping: the sources stop; the frames already read from them are analyzed and stored');
    const frames = Number(/person-bicycle-car-detection: (\d+) frames/.exec(stdout)?.[1]);
    expect(frames).toBeGreaterThan(0);
    expect(stdout).toContain(`frames: ${frames}  `); // every published frame was processed before exit
  });

  it.skipIf(!existsSync(clip))('serves /sources while running: a source added over HTTP and one by SIGHUP are analyzed, another process queries the results; SIGTERM stops it', { timeout: 180_000 }, async () => {
    const file = join(dataDir, 'service.yaml');
    const header = `apps: [${join(root, 'configs/apps/traffic.yaml')}]\nmodels: ${join(root, 'configs/models.yaml')}\nsources:\n`;
    const source = (id: string): string => `  - { id: ${id}, path: ${clip}, apps: [traffic], fps: 1, loop: true, speed: 1 }\n`;
    const http = `http: { sources: { directories: [${dirname(clip)}] } }\n`;
    writeFileSync(file, http + header + source('first'));
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), 'run', file, '--http-port', String(port), '--data-dir', join(dataDir, 'service')], {
      cwd: root,
      env: { ...process.env, PANOPTES_LOG_LEVEL: 'silent', PANOPTES_API_TOKEN: 'the-token-of-this-test' },
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const url = `http://127.0.0.1:${port}`;
    type Listed = { sources: { id: string; state: string; published: number }[] };
    // Before the ingest worker starts, /sources answers 503 with an error body.
    const sources = async (): Promise<Listed['sources']> => ((await (await fetch(`${url}/sources`)).json()) as Partial<Listed>).sources ?? [];
    const until = async (what: string, check: (s: Listed['sources']) => boolean): Promise<void> => {
      for (const deadline = Date.now() + 60_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 250))) {
        if (check(await sources().catch(() => []))) return;
      }
      throw new Error(`timed out waiting for ${what}`);
    };
    try {
      await until('the first source', (s) => s.some((x) => x.id === 'first' && x.published > 0));
      const body = JSON.stringify({ id: 'second', path: clip, apps: ['traffic'], fps: 1, loop: true, speed: 1 });
      const posted = await fetch(`${url}/sources`, { method: 'POST', body, headers: { 'content-type': 'application/json', authorization: 'Bearer the-token-of-this-test' } });
      expect(posted.status).toBe(201);
      writeFileSync(file, http + header + source('first') + source('third'));
      child.kill('SIGHUP');
      await until('the second and third sources', (s) => ['second', 'third'].every((id) => s.some((x) => x.id === id && x.published > 0)));
      // The reload left running the source it did not change, and the one added over HTTP.
      const states = Object.fromEntries((await sources()).map((x) => [x.id, x.state]));
      expect(states).toEqual({ first: 'running', second: 'running', third: 'running' });

      // Another process queries the results this run holds open, through it, read-only as ever.
      const service = join(dataDir, 'service');
      // The new sources' first rows wait for the sink's flush: a minute, on a machine busy with other tests.
      let counted: { source: string; n: number }[] = [];
      for (const deadline = Date.now() + 60_000; counted.length < 3 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 500))) {
        const query = await panoptes('query', 'SELECT source, count() AS n FROM frames GROUP BY source ORDER BY source', '--format', 'json', '--data-dir', service);
        expect(query.stderr).toBe('');
        counted = JSON.parse(query.stdout) as typeof counted;
      }
      expect(counted.map((r) => r.source)).toEqual(['first', 'second', 'third']);
      const write = await panoptes('query', 'DROP TABLE frames', '--data-dir', service);
      expect(write.stderr).toMatch(/^panoptes: queries are read-only/);
      const tooMany = await panoptes('query', 'SELECT * FROM frames', '--max-rows', '1', '--data-dir', service);
      expect(tooMany.stderr).toMatch(/^panoptes: query failed: the answer has \d+ rows, over the limit of 1/);
      // A second run on the same results is refused in one line that names the process holding them.
      const second = await panoptes('replay', clip, '--app', 'traffic', '--data-dir', service);
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(/^panoptes: the results in \S+ are held by process \d+ \(panoptes run \S+service\.yaml/);
      expect(second.stderr.trim().split('\n')).toHaveLength(1);
      // A dashboard's event stream, open when the run stops, does not hold it up.
      const events = await fetch(`${url}/events`);
      expect(events.headers.get('content-type')).toContain('text/event-stream');
    } finally {
      child.kill('SIGTERM');
    }
    const stopping = Date.now();
    expect(await exited).toBe(0);
    expect(Date.now() - stopping).toBeLessThan(4_500);
    expect(existsSync(join(dataDir, 'service', 'run', 'holder.json'))).toBe(false);
    for (const id of ['first', 'second', 'third']) expect(stdout).toMatch(new RegExp(`${id}: [1-9]\\d* frames`));
  });

  it('answers `panoptes query` from another shell while `run configs/demo.yaml --http-port` holds the results', { timeout: 180_000 }, async () => {
    const port = await freePort();
    const demo = join(dataDir, 'demo');
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), 'run', 'configs/demo.yaml', '--http-port', String(port), '--data-dir', demo], {
      cwd: root,
      env: { ...process.env, PANOPTES_LOG_LEVEL: 'silent', PANOPTES_API_TOKEN: 'the-token-of-this-test' },
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    let running = true;
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => {
        running = false;
        resolve(code);
      }),
    );
    try {
      let frames = 0;
      let answered = '';
      for (const deadline = Date.now() + 150_000; frames === 0 && running && Date.now() < deadline; await new Promise((r) => setTimeout(r, 2000))) {
        const query = await panoptes('query', 'SELECT count() AS n FROM frames', '--format', 'json', '--data-dir', demo);
        answered = query.stdout + query.stderr;
        if (query.code === 0) frames = (JSON.parse(query.stdout) as { n: number }[])[0]?.n ?? 0;
      }
      // What both processes said, for a failure on a machine where it cannot be rerun.
      expect(frames, `the last query answered: ${answered}\nthe run said: ${stderr.slice(-3000)}`).toBeGreaterThan(0);
      expect(stderr).toContain(`dashboard at http://127.0.0.1:${port}/`);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  it('prints its version, and says a bad argument in one line like every other error', async () => {
    const version = await panoptes('--version');
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    for (const args of [['run'], ['replay', 'x.mp4', '--app', 'traffic', '--fps', 'abc'], ['nosuch'], ['query', '--bogus']]) {
      const result = await panoptes(...args);
      expect(result.code, args.join(' ')).toBe(1);
      expect(result.stderr, args.join(' ')).toMatch(/^panoptes: .+ \(see --help\)\n$/);
    }
  });

  it('lists the model zoo', async () => {
    const result = await panoptes('models', 'list');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/centernet\s+detect-objects/);
    expect(result.stdout).toMatch(/ppocr-rec\s+recognize-text/);
  });

  it('refuses an unknown app', async () => {
    const result = await panoptes('replay', 'x.mp4', '--app', 'nosuchapp', '--data-dir', dataDir);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no app named "nosuchapp"');
  });
});
