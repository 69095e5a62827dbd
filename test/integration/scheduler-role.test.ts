import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRoles, runDeployment } from '../../cli/deployment.js';
import { compileDeployment, deploymentSchema, ErrorCode, PanoptesError, projectRoot, silentLogger } from '../../core/index.js';

describe('the scheduler role', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-scheduler-role-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const compile = (scheduler?: Record<string, unknown>) =>
    compileDeployment(
      deploymentSchema.parse({
        apps: ['apps/traffic.yaml'],
        sources: [{ id: 'card', synthetic: { lavfi: 'testsrc2=size=160x90:rate=5', durationS: 1 }, apps: ['traffic'] }],
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
});
