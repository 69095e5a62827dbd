// `panoptes plan` and `panoptes profile`, run as a user runs them.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';
import { loadProfileFile } from '../../scheduler/index.js';
import { TABLE_2, TABLE_2_SLO_MS } from '../unit/scheduler-fixtures.js';

const run = promisify(execFile);
const root = projectRoot();

async function panoptes(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), ...args], { cwd: root, env: { ...process.env, PANOPTES_LOG_LEVEL: 'silent' } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('panoptes plan', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-plan-'));
  const profiles = join(dir, 'profiles');
  mkdirSync(profiles);
  for (const profile of TABLE_2) {
    // As users write them: the format, without the version.
    const { version: _, ...unversioned } = profile;
    writeFileSync(join(profiles, `gtx1080.${profile.model}.json`), JSON.stringify(unversioned));
  }
  const sessionsFile = (sessions: unknown): string => {
    const file = join(dir, `sessions-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(file, JSON.stringify(sessions));
    return file;
  };
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('with --devices, steps a session down to a cheaper variant from the zoo when the plan needs more devices', async () => {
    // EfficientNet-Lite2 at 100 crops/s needs two devices by this machine's profiles (a copy, so that
    // measuring the committed ones again does not move the plan); Lite0 stands in on one.
    const sessions = sessionsFile([{ id: 'kinds', model: 'efficientnet-lite2', sloMs: 500, rate: 100 }]);
    const committed = join(root, 'test/fixtures/profiles');
    expect(JSON.parse((await panoptes('plan', '--sessions', sessions, '--profiles', committed, '--json')).stdout).nodes).toHaveLength(2);
    const { code, stdout } = await panoptes('plan', '--sessions', sessions, '--profiles', committed, '--devices', '1', '--json');
    expect(code).toBe(0);
    const plan = JSON.parse(stdout) as { nodes: { sessions: { model: string }[] }[]; downgrades: { from: string; to: string }[] };
    expect(plan.nodes).toHaveLength(1);
    expect(plan.nodes[0]!.sessions[0]!.model).toBe('efficientnet-lite0');
    expect(plan.downgrades).toMatchObject([{ session: 'kinds', from: 'efficientnet-lite2', to: 'efficientnet-lite0' }]);
    // The detector's variants are the same CenterNet at smaller inputs: 40 frames/s fit one device at 384 px.
    const road = sessionsFile([{ id: 'road', model: 'centernet', sloMs: 1000, rate: 40 }]);
    const detector = JSON.parse((await panoptes('plan', '--sessions', road, '--profiles', committed, '--devices', '1', '--json')).stdout) as typeof plan;
    expect(detector.nodes.map((n) => n.sessions[0]!.model)).toEqual(['centernet-384']);
    expect(detector.downgrades).toMatchObject([{ session: 'road', from: 'centernet', to: 'centernet-384' }]);
  });

  it("prints the paper's low-load plan (Table 2) as JSON", async () => {
    const sessions = (['A', 'B', 'C'] as const).map((model) => ({ id: `s-${model}`, model, sloMs: TABLE_2_SLO_MS[model], rate: model === 'A' ? 64 : 32 }));
    const { code, stdout, stderr } = await panoptes('plan', '--sessions', sessionsFile(sessions), '--profiles', profiles, '--json');
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toEqual({
      nodes: [
        {
          dutyCycleMs: 125,
          sessions: [
            { id: 's-A', model: 'A', sloMs: 200, rate: 64, batch: 8 },
            { id: 's-B', model: 'B', sloMs: 250, rate: 32, batch: 4 },
          ],
        },
        { dutyCycleMs: expect.any(Number) as number, sessions: [{ id: 's-C', model: 'C', sloMs: 250, rate: 32, batch: expect.any(Number) as number }] },
      ],
      unschedulable: [],
    });
  });

  it('names the model and the device when a profile is missing, and the file and field when sessions are wrong', async () => {
    const missing = await panoptes('plan', '--sessions', sessionsFile([{ id: 'x', model: 'yolo', sloMs: 100, rate: 10 }]), '--profiles', profiles);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^panoptes: no batch profile for model "yolo" on device "gtx1080"/);

    const file = sessionsFile([{ id: 'x', model: 'A', sloMs: -5, rate: 10 }]);
    const invalid = await panoptes('plan', '--sessions', file, '--profiles', profiles);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain(file);
    expect(invalid.stderr).toContain('[0].sloMs');
  });
});

describe('panoptes profile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-profile-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('measures a real model at each batch size and writes a profile the scheduler loads', async () => {
    const { code, stdout, stderr } = await panoptes('profile', 'ppocr-rec', '--profiles', dir, '--max-batch', '3', '--runs', '3', '--warmup', '1');
    expect(code, stderr).toBe(0);
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    expect(stdout.trim()).toBe(join(dir, files[0]!));
    const profile = loadProfileFile(join(dir, files[0]!));
    expect(profile.model).toBe('ppocr-rec');
    expect(profile.device).toMatch(/^cpu-.+-\d+c$/);
    expect(profile.batches.map((b) => b.batch)).toEqual([1, 2, 3]);
    for (const b of profile.batches) {
      expect(b.latencyMs).toBeGreaterThan(0);
      expect(b.memoryMB).toBeGreaterThan(0);
    }
    expect(profile.preprocessMs).toBeGreaterThan(0);
    expect(profile.postprocessMs).toBeGreaterThanOrEqual(0);
  }, 120_000);

  it('says which models there are when the name is unknown', async () => {
    const { code, stderr } = await panoptes('profile', 'yolo', '--profiles', dir);
    expect(code).toBe(1);
    expect(stderr).toMatch(/no model named "yolo" in the zoo; known: centernet, centernet-384, centernet-256, ppocr-det, ppocr-rec/);
  });

  it('BAD INPUT: a prefix family naming a member twice, or models that share no prefix, is a clear error', async () => {
    const twice = await panoptes('profile', 'centernet+centernet', '--profiles', dir);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/"centernet" named more than once in centernet\+centernet/);
    const apart = await panoptes('profile', 'centernet+blazeface', '--profiles', dir);
    expect(apart.code).toBe(1);
    expect(apart.stderr).toMatch(/centernet, blazeface do not form a prefix family/);
  });
});

describe('panoptes simulate', () => {
  it('prints the figures of an experiment as one JSON object on the last line, and names the known ones for an unknown one', async () => {
    const { code, stdout } = await panoptes('simulate', 'planning1000SessionsMs', '--json');
    expect(code).toBe(0);
    const figures = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, number>;
    expect(Object.keys(figures)).toEqual(['planning1000SessionsMs']);
    expect(figures.planning1000SessionsMs).toBeGreaterThan(0);
    expect(figures.planning1000SessionsMs).toBeLessThan(1000);

    const unknown = await panoptes('simulate', 'nope');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/unknown experiment "nope"; known: all, earlyDropVsLazy, /);
  });
});
