/**
 * The sink rides out a ClickHouse server that is down for 30 s in the middle of a run: inserts
 * fail, the rows wait on the bus uncommitted and are retried with backoff, and once the server
 * is back every frame's rows are stored, none lost, none doubled (on a loaded machine a frame may
 * instead be dropped at its stage deadline, a row of its own).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDeployment } from '../../cli/deployment.js';
import { compileDeployment, deploymentSchema, projectRoot, silentLogger } from '../../core/index.js';
import { clickhouseUnavailableReason, startClickHouseServer, type ClickHouseServer } from '../../tools/clickhouse/index.js';

const clip = join(projectRoot(), '../shared/footage/car-detection.mp4');
const skipReason = clickhouseUnavailableReason() ?? (existsSync(clip) ? undefined : `${clip} is missing`);

async function count(url: string, sql: string): Promise<number> {
  const response = await fetch(url, { method: 'POST', body: sql });
  const text = (await response.text()).trim();
  if (!response.ok || !/^\d+$/.test(text)) throw new Error(`${sql}: ${text}`);
  return Number(text);
}

describe.skipIf(skipReason !== undefined)('a ClickHouse server down for 30 s mid-run', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'panoptes-outage-'));
  const servers: ClickHouseServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(scratch, { recursive: true, force: true });
  });

  it('loses no row', async () => {
    // This test's own server, not the shared one the environment names for the other tests.
    delete process.env.PANOPTES_CLICKHOUSE_URL;
    const server = await startClickHouseServer({ dataDir: join(scratch, 'server') });
    servers.push(server);
    const deployment = deploymentSchema.parse({
      apps: ['apps/traffic.yaml'],
      // 30 s of footage at real time, so frames keep coming while the server is down.
      sources: [{ id: 'road', path: clip, apps: ['traffic'], fps: 2, speed: 1 }],
      sink: { kind: 'clickhouse', url: server.url, flushMs: 200 },
    });
    const config = compileDeployment(deployment, join(projectRoot(), 'configs/test.yaml'), { dataDir: join(scratch, 'data') });
    const run = runDeployment(config, { logger: silentLogger() });

    // Down once the first rows are in, for 30 s, then back on the same data and ports.
    const started = Date.now();
    while ((await count(server.url, 'SELECT count() FROM frames').catch(() => 0)) === 0) {
      if (Date.now() - started > 60_000) throw new Error('no rows stored within 60 s');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await server.stop();
    await new Promise((resolve) => setTimeout(resolve, 30_000));
    servers.push(await startClickHouseServer({ dataDir: server.dataDir, httpPort: server.httpPort, tcpPort: server.tcpPort }));

    const summary = await run;
    const published = summary.sources[0]?.frames ?? 0;
    expect(published).toBeGreaterThanOrEqual(60);
    // Every frame accounted for: its row, or, on a loaded machine, its drop at the stage deadline
    // (a drop is a row too, stored through the same outage). Nothing dropped for another reason.
    const stored = await count(server.url, "SELECT count() FROM frames WHERE source = 'road'");
    const late = await count(server.url, "SELECT uniqExact(frame_seq) FROM drops WHERE what = 'frame' AND reason = 'deadline'");
    expect(stored).toBeGreaterThan(0);
    expect(stored + late, `${stored} frames stored, ${late} dropped at their deadline`).toBe(published);
    expect(await count(server.url, "SELECT count() FROM drops WHERE reason != 'deadline'")).toBe(0);
  }, 180_000);
});
