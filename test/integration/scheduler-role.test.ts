import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRoles, runDeployment } from '../../cli/deployment.js';
import { compileDeployment, deploymentSchema, ErrorCode, PanoptesError, projectRoot, silentLogger } from '../../core/index.js';

describe('the scheduler role', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-scheduler-role-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const compile = (scheduler?: Record<string, unknown>, source: Record<string, unknown> = {}) =>
    compileDeployment(
      deploymentSchema.parse({
        apps: ['apps/traffic.yaml'],
        sources: [{ id: 'card', synthetic: { lavfi: 'testsrc2=size=160x90:rate=5', durationS: 1 }, apps: ['traffic'], ...source }],
        ...(scheduler ? { scheduler } : {}),
      }),
      join(projectRoot(), 'configs/test.yaml'),
      { dataDir: join(dir, 'data') },
    );

  it('runs with `all` only when the deployment configures it, and refuses `--roles scheduler` without it', async () => {
    expect(parseRoles('all', compile()).has('scheduler')).toBe(false);
    expect(parseRoles('all', compile({ profiles: dir })).has('scheduler')).toBe(true);
    await expect(runDeployment(compile(), { logger: silentLogger(), roles: parseRoles('ingest,backend,sink,scheduler') })).rejects.toThrow(/has no `scheduler:` section/);
  });

  it('fails at start, naming the model and the device, when a model of the apps has no profile', async () => {
    const err = await runDeployment(compile({ profiles: dir, device: 'gpu-x' }), { logger: silentLogger() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PanoptesError);
    expect((err as PanoptesError).code).toBe(ErrorCode.ProfileNotFound);
    expect((err as PanoptesError).message).toMatch(/no batch profile for model "centernet" on device "gpu-x"/);
  });

  it('plans from the backend\'s stats, and the backend follows the plan with every frame analyzed', async () => {
    const scheduler = { profiles: join(projectRoot(), 'profiles'), device: 'cpu-amd-epyc-2c', minEpochS: 1 };
    let plans: Record<string, unknown>[] = [];
    let sessions: string[] = [];
    const summary = await runDeployment(compile(scheduler, { synthetic: { lavfi: 'testsrc2=size=160x90:rate=5', durationS: 6 }, fps: 2, speed: 1 }), {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        plans = (await sink.query('SELECT epoch, backend, session, model, batch FROM plans ORDER BY epoch')).rows;
        sessions = (await sink.query('SELECT DISTINCT session FROM session_stats WHERE arrival_rate > 0 ORDER BY session')).rows.map((r) => String(r.session));
      },
    });
    expect(plans.length).toBeGreaterThan(0);
    expect(plans[0]).toMatchObject({ backend: `${process.pid}-0`, model: 'centernet' });
    // Requests went to the planned session (`model@slo`) once the plan was in force.
    expect(sessions).toContain(String(plans[0]!.session));
    expect(summary.frames).toBe(summary.sources[0]!.frames);
    expect(summary.drops).toBe(summary.deadlineDrops);
  });
});

