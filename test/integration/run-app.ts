import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parse, stringify } from 'yaml';
import { runDeployment, type RunSummary } from '../../cli/deployment.js';
import { compileDeployment, deploymentSchema, projectRoot, silentLogger, type DeploymentInput } from '../../core/index.js';
import { resolveFfmpegPath } from '../../ingest/index.js';

const root = projectRoot();

/**
 * Replays one source through the embedded pipeline with apps named from configs/apps (or given
 * as app files), and returns the rows each query finds once every frame is analyzed.
 */
export async function runApps(
  apps: string[],
  source: DeploymentInput['sources'][number],
  queries: Record<string, string>,
  backend: DeploymentInput['backend'] = {},
): Promise<{ summary: RunSummary; rows: Record<string, Record<string, unknown>[]> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-app-'));
  try {
    const deployment = deploymentSchema.parse({
      models: join(root, 'configs/models.yaml'),
      apps: apps.map((app) => (app.endsWith('.yaml') ? app : join(root, `configs/apps/${app}.yaml`))),
      sources: [source],
      backend,
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

/** An app node as an example file gives it, for a test to scale down. */
export interface ExampleNode {
  id: string;
  specialize?: Record<string, unknown>;
  cache?: Record<string, unknown>;
}

/** `docs/examples/<name>.yaml` with `edit` applied (its keys scaled down to a short clip), written into `dir`: the file to run. */
export function exampleApp(dir: string, name: string, edit: (node: (id: string) => ExampleNode) => void): string {
  const app = parse(readFileSync(join(root, `docs/examples/${name}.yaml`), 'utf8')) as { nodes: ExampleNode[] };
  edit((id) => app.nodes.find((n) => n.id === id)!);
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify(app));
  return file;
}

/** `clip` played `times` times over, written into `dir` (a GIF encoded to H.264, a video copied). */
export function loopedClip(dir: string, clip: string, times: number): string {
  const looped = join(dir, `${basename(clip).replace(/\.\w+$/, '')}-${times}x.mp4`);
  const codec = clip.endsWith('.gif') ? ['-c:v', 'libx264', '-pix_fmt', 'yuv420p'] : ['-c', 'copy'];
  execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-stream_loop', String(times - 1), '-i', clip, ...codec, looped]);
  return looped;
}
