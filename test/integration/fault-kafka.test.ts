/**
 * Faults on Kafka, each role its own process (docs/faults.md): kill -9 of ingest, of the backend
 * and of the sink mid-replay, a broker restart, a broker replaced by an empty one, and SIGTERM
 * while the broker is unreachable. After each, a query proves that every frame ingested has its
 * rows or a `drops` row; where nothing was lost, the results equal the clean run's and there is
 * no drop.
 *
 * The suite starts its own broker and ClickHouse server on 127.0.0.1 (it kills and wipes them);
 * the cases run in order on them, each with a database of its own.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClickHouseServer, type ClickHouseServer } from '../../tools/clickhouse/index.js';
import { startKafkaBroker, type KafkaBroker } from '../../tools/kafka/index.js';
import { waitFor } from '../conformance/wait-for.js';
import { accounting, CLIP_FRAMES, drained, faultSkipReason, framesCommitted, results, RoleProcess, scalar, writeDeployment } from './fault-harness.js';

const skipReason = faultSkipReason();

describe.skipIf(skipReason !== undefined)(`faults on Kafka${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-faults-'));
  const dataDir = join(dir, 'data'); // the synthetic clip, rendered once
  let broker: KafkaBroker;
  let clickhouse: ClickHouseServer;
  const oldBrokers: KafkaBroker[] = [];
  let clean: Awaited<ReturnType<typeof results>>;
  const running = new Set<RoleProcess>();

  const role = (name: string, file: string): RoleProcess => {
    const started = new RoleProcess(name, file, dataDir, { brokers: broker.brokers, clickhouse: clickhouse.url });
    running.add(started);
    void started.exited.then(() => running.delete(started));
    return started;
  };
  const rowsStored = (database: string): Promise<number> => scalar(clickhouse.url, database, 'SELECT count() FROM frames').catch(() => 0);

  /** The three roles on a fresh database; `during` makes the fault while ingest replays and returns the roles that finish the case. */
  type Roles = { ingest: RoleProcess; backend: RoleProcess; sink: RoleProcess };

  async function replay(
    database: string,
    during: (roles: Roles & { file: string; progress: () => Promise<number> }) => Promise<Roles>,
    options: { scheduler?: boolean } = {},
  ): Promise<{ ingested: number; stopMs: number[]; roles: Roles }> {
    const file = writeDeployment(dir, database, options);
    const base = await framesCommitted(broker.brokers); // the cases before this one's, on this broker
    const progress = async (): Promise<number> => (await framesCommitted(broker.brokers)) - base;
    const after = await during({ sink: role('sink', file), backend: role('backend', file), ingest: role('ingest', file), file, progress });
    await after.ingest.succeeded();
    await drained(broker.brokers);
    const stopMs = await Promise.all([after.backend.stop(), after.sink.stop()]);
    return { ingested: after.ingest.framesPublished(), stopMs, roles: after };
  }

  /** After a fault that loses nothing: the clean run's results, every frame stored, no drop. */
  async function expectNothingLost(database: string, ingested: number, what: string): Promise<void> {
    const counts = await accounting(clickhouse.url, database, ingested);
    console.log(`${what}: ${ingested} frames ingested, ${counts.stored} with rows, ${counts.drops} drops`);
    expect(ingested).toBe(CLIP_FRAMES);
    expect(counts).toEqual({ stored: CLIP_FRAMES, droppedOnly: 0, unaccounted: 0, drops: 0 });
    expect(await results(clickhouse.url, database)).toEqual(clean);
  }

  beforeAll(async () => {
    [broker, clickhouse] = await Promise.all([startKafkaBroker({ dataDir: join(dir, 'broker') }), startClickHouseServer({ dataDir: join(dir, 'clickhouse') })]);
    const { ingested } = await replay('clean', async (roles) => roles);
    expect(ingested).toBe(CLIP_FRAMES);
    clean = await results(clickhouse.url, 'clean');
    expect(clean.frames).toBe(CLIP_FRAMES);
    expect(await accounting(clickhouse.url, 'clean', ingested)).toEqual({ stored: CLIP_FRAMES, droppedOnly: 0, unaccounted: 0, drops: 0 });
  }, 180_000);

  afterAll(async () => {
    await Promise.all([...running].map((p) => p.kill()));
    await Promise.all([broker?.stop(), clickhouse?.stop(), ...oldBrokers.map((b) => b.stop())]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('loses nothing when ingest is killed with SIGKILL mid-replay and started again', async () => {
    const { ingested } = await replay('kill_ingest', async ({ ingest, backend, sink, file, progress }) => {
      await waitFor(async () => (await progress()) >= 4, 'the backend to commit some frames', { timeoutMs: 90_000, intervalMs: 200 });
      await ingest.kill();
      // A new worker replays the source from its start; row ids make the frames seen twice count once.
      return { ingest: role('ingest', file), backend, sink };
    });
    await expectNothingLost('kill_ingest', ingested, 'ingest killed');
  }, 180_000);

  it('loses nothing when the backend is killed with SIGKILL mid-replay and started again', async () => {
    const { ingested } = await replay('kill_backend', async ({ ingest, backend, sink, file, progress }) => {
      await waitFor(async () => (await progress()) >= 6, 'the backend to commit some frames', { timeoutMs: 90_000, intervalMs: 200 });
      await backend.kill();
      expect(ingest.child.exitCode, 'ingest still publishing').toBeNull();
      return { ingest, backend: role('backend', file), sink };
    });
    await expectNothingLost('kill_backend', ingested, 'backend killed');
  }, 180_000);

  it('loses nothing when the sink is killed with SIGKILL mid-replay and started again', async () => {
    const { ingested } = await replay('kill_sink', async ({ ingest, backend, sink, file }) => {
      await waitFor(async () => (await rowsStored('kill_sink')) >= 4, 'the sink to store some frames', { timeoutMs: 90_000, intervalMs: 200 });
      await sink.kill();
      expect(ingest.child.exitCode, 'ingest still publishing').toBeNull();
      return { ingest, backend, sink: role('sink', file) };
    });
    await expectNothingLost('kill_sink', ingested, 'sink killed');
  }, 180_000);

  it('loses nothing when the broker restarts mid-replay', async () => {
    const { ingested } = await replay('broker_restart', async (roles) => {
      await waitFor(async () => (await roles.progress()) >= 4, 'the backend to commit some frames', { timeoutMs: 90_000, intervalMs: 200 });
      expect(roles.ingest.child.exitCode, 'ingest still publishing').toBeNull();
      await broker.stop();
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      broker = await startKafkaBroker({ dataDir: broker.dataDir, port: broker.port, controllerPort: broker.controllerPort });
      return roles;
    });
    await expectNothingLost('broker_restart', ingested, 'broker restarted');
  }, 180_000);

  it('records as drops what a broker replaced by an empty one lost, re-creates the topics, logs it boundedly, and stops on SIGTERM', async () => {
    const database = 'wiped';
    const { ingested, stopMs, roles } = await replay(database, async ({ ingest, backend, sink }) => {
      await waitFor(async () => (await rowsStored(database)) >= 4, 'the sink to store some frames', { timeoutMs: 90_000, intervalMs: 200 });
      // The sink stops taking rows: what the backend produces now waits on the broker, and is lost with it.
      sink.child.kill('SIGSTOP');
      const before = await framesCommitted(broker.brokers);
      await waitFor(async () => (await framesCommitted(broker.brokers)) >= before + 4, 'the backend to produce rows the sink has not taken', { timeoutMs: 60_000, intervalMs: 200 });
      expect(ingest.child.exitCode, 'ingest still publishing when the broker goes').toBeNull();
      await broker.kill();
      oldBrokers.push(broker);
      broker = await startKafkaBroker({ dataDir: join(dir, 'empty-broker'), port: broker.port, controllerPort: broker.controllerPort });
      sink.child.kill('SIGCONT');
      return { ingest, backend, sink };
    });
    const counts = await accounting(clickhouse.url, database, ingested);
    console.log(`broker replaced by an empty one: ${ingested} frames ingested, ${counts.stored} with rows, ${counts.droppedOnly} with only a drop, ${counts.drops} drops, stops in ${stopMs.join('/')} ms`);
    expect(ingested).toBe(CLIP_FRAMES);
    const lossLines = [roles.ingest, roles.backend, roles.sink].map((p) => `${p.role}:\n${p.output.split('\n').filter((line) => /lost|drops recorded|re-created|could not be recorded/i.test(line)).join('\n')}`);
    expect(counts.unaccounted, lossLines.join('\n')).toBe(0);
    expect(counts.droppedOnly).toBeGreaterThan(0); // the rows lost with the broker were said
    expect(await scalar(clickhouse.url, database, "SELECT count() FROM drops WHERE reason = 'broker-replaced'")).toBe(counts.drops);
    // One line per kind of failure, then a count every 30 s (it was hundreds a minute).
    for (const process of [roles.backend, roles.sink, roles.ingest]) {
      expect(process.lines(/does not host this topic-partition/), `${process.role}:\n${process.output.slice(-5_000)}`).toBeLessThanOrEqual(12);
    }
    for (const ms of stopMs) expect(ms).toBeLessThan(10_000);
  }, 240_000);

  it('every role, the scheduler too, stops within 10 s of SIGTERM while the broker is unreachable, ingest mid-replay', async () => {
    const file = writeDeployment(dir, 'unreachable', { scheduler: true });
    const base = await framesCommitted(broker.brokers);
    const roles = ['sink', 'backend', 'scheduler', 'ingest'].map((name) => role(name, file));
    await waitFor(async () => (await framesCommitted(broker.brokers)) >= base + 4, 'the backend to commit some frames', { timeoutMs: 90_000, intervalMs: 200 });
    expect(roles[3]!.child.exitCode, 'ingest still publishing').toBeNull();
    await broker.kill();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const stops = await Promise.all(roles.map((p) => p.terminate()));
    console.log(`SIGTERM with the broker unreachable: ${roles.map((p, i) => `${p.role} ${stops[i]!.ms} ms (exit ${stops[i]!.code})`).join(', ')}`);
    for (const [i, { ms }] of stops.entries()) expect(ms, `${roles[i]!.role}:\n${roles[i]!.output.slice(-5_000)}`).toBeLessThan(10_000);
    // A source stopped while its next frame waited on the broker was stopped, not failed.
    expect(stops[3]!.code, roles[3]!.output.slice(-2_000)).toBe(0);
  }, 180_000);
});
