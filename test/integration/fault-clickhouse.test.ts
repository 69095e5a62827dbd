/**
 * The ClickHouse server down for 30 s during a replay, with ingest, backend and sink as separate
 * processes on Kafka (docs/faults.md): the sink's inserts fail, its rows wait on the broker
 * uncommitted and are retried with back-off; once the server is back, every frame has its rows,
 * the results equal a clean run's, and there is no drop.
 *
 * Its own broker and server on 127.0.0.1: the server is stopped, which no other test may see.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startClickHouseServer, type ClickHouseServer } from '../../tools/clickhouse/index.js';
import { startKafkaBroker, type KafkaBroker } from '../../tools/kafka/index.js';
import { waitFor } from '../conformance/wait-for.js';
import { accounting, CLIP_FRAMES, drained, faultSkipReason, results, RoleProcess, scalar, writeDeployment } from './fault-harness.js';

const skipReason = faultSkipReason();
const OUTAGE_MS = 30_000;

describe.skipIf(skipReason !== undefined)(`the ClickHouse server down during a replay${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-faults-ch-'));
  const dataDir = join(dir, 'data');
  const servers: ClickHouseServer[] = [];
  let broker: KafkaBroker | undefined;
  const running = new Set<RoleProcess>();

  afterAll(async () => {
    await Promise.all([...running].map((p) => p.kill()));
    await Promise.all([broker?.stop(), ...servers.map((s) => s.stop())]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('loses no row when the server is down for 30 s mid-replay, and stores what a clean run stores', async () => {
    [broker, servers[0]] = await Promise.all([startKafkaBroker({ dataDir: join(dir, 'broker') }), startClickHouseServer({ dataDir: join(dir, 'clickhouse') })]);
    const kafka = broker;
    let server = servers[0];
    const run = async (database: string, during: () => Promise<void>): Promise<number> => {
      const file = writeDeployment(dir, database);
      const roles = ['sink', 'backend', 'ingest'].map((name) => new RoleProcess(name, file, dataDir, { brokers: kafka.brokers, clickhouse: server.url }));
      roles.forEach((p) => running.add(p));
      const [sink, backend, ingest] = roles as [RoleProcess, RoleProcess, RoleProcess];
      await during();
      await ingest.succeeded();
      await drained(kafka.brokers);
      await Promise.all([backend.stop(), sink.stop()]);
      roles.forEach((p) => running.delete(p));
      return ingest.framesPublished();
    };

    await run('clean', async () => {});
    const clean = await results(server.url, 'clean');
    expect(clean.frames).toBe(CLIP_FRAMES);

    const ingested = await run('outage', async () => {
      await waitFor(async () => (await scalar(server.url, 'outage', 'SELECT count() FROM frames').catch(() => 0)) >= 2, 'the sink to store some frames', { timeoutMs: 90_000, intervalMs: 200 });
      const stored = await scalar(server.url, 'outage', 'SELECT count() FROM frames');
      await server.stop();
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      server = await startClickHouseServer({ dataDir: server.dataDir, httpPort: server.httpPort, tcpPort: server.tcpPort });
      servers.push(server);
      expect(stored, 'the outage began mid-replay').toBeLessThan(CLIP_FRAMES);
    });
    const counts = await accounting(server.url, 'outage', ingested);
    console.log(`ClickHouse down ${OUTAGE_MS / 1000} s: ${ingested} frames ingested, ${counts.stored} with rows, ${counts.drops} drops`);
    expect(ingested).toBe(CLIP_FRAMES);
    expect(counts).toEqual({ stored: CLIP_FRAMES, droppedOnly: 0, unaccounted: 0, drops: 0 });
    expect(await results(server.url, 'outage')).toEqual(clean);
  }, 300_000);
});
