import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';

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
    expect(result.stderr).toContain('nope.mp4');
    expect(result.stderr.trim().split('\n').length).toBeLessThanOrEqual(2);
  });

  it('names the key, line and value of a bad deployment', async () => {
    const file = join(dataDir, 'bad.yaml');
    writeFileSync(file, `apps: [${join(root, 'configs/apps/traffic.yaml')}]\nmodels: ${join(root, 'configs/models.yaml')}\nsources:\n  - id: cam\n    path: x.mp4\n    apps: [traffic]\n    fps: fast\n`);
    const result = await panoptes('run', file, '--data-dir', dataDir);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${file}:7: sources[0].fps: got "fast"; expected number`);
  });

  it.skipIf(!existsSync(clip))('stops a looping replay cleanly on SIGINT: in-flight frames stored, summary printed', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), 'replay', clip, '--app', 'traffic', '--loop', '--speed', '1', '--data-dir', join(dataDir, 'loop')], {
      cwd: root,
      env: { ...process.env, PANOPTES_LOG_LEVEL: 'silent' },
    });
    let stdout = '';
    let stderr = '';
    let interrupted = false;
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      // Progress lines come every 5 s off a terminal, the first at once with 0 frames; wait for one with frames.
      if (!interrupted && /replay: [1-9]/.test(stderr)) interrupted = child.kill('SIGINT');
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    expect(stderr).toContain('stopping: finishing the frames in flight');
    const frames = Number(/person-bicycle-car-detection: (\d+) frames/.exec(stdout)?.[1]);
    expect(frames).toBeGreaterThan(0);
    expect(stdout).toContain(`frames: ${frames}  `); // every published frame was processed before exit
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
