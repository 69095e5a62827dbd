import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runDeployment, type RunSummary } from '../../cli/deployment.js';
import { compileDeployment, deploymentSchema, projectRoot, silentLogger, type DeploymentInput } from '../../core/index.js';

const root = projectRoot();

/**
 * Replays one source through the embedded pipeline with apps named from configs/apps (or given
 * as app files), and returns the rows each query finds once every frame is analyzed.
 */
export async function runApps(
  apps: string[],
  source: DeploymentInput['sources'][number],
  queries: Record<string, string>,
): Promise<{ summary: RunSummary; rows: Record<string, Record<string, unknown>[]> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-app-'));
  try {
    const deployment = deploymentSchema.parse({
      models: join(root, 'configs/models.yaml'),
      apps: apps.map((app) => (app.endsWith('.yaml') ? app : join(root, `configs/apps/${app}.yaml`))),
      sources: [source],
    });
    const config = compileDeployment(deployment, join(root, 'configs/test.yaml'), { dataDir });
    const rows: Record<string, Record<string, unknown>[]> = {};
    const summary = await runDeployment(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        for (const [name, sql] of Object.entries(queries)) rows[name] = (await sink.query(sql)).rows;
      },
    });
    return { summary, rows };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
