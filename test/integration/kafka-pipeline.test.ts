/**
 * The pipeline across processes on a real Kafka broker: ingest, backend and sink each run as
 * their own `panoptes run --roles <role>` process, and what users' queries return must equal the
 * embedded run on the same clip, also when the backend is killed with SIGKILL mid-replay and
 * restarted, and when the broker itself restarts mid-run.
 *
 * Each test gets a broker of its own (the restart test stops it; topic names are fixed).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaBus, projectRoot, silentLogger, Topics } from '../../core/index.js';
import { kafkaUnavailableReason, startKafkaBroker, type KafkaBroker } from '../../tools/kafka/broker.js';
import { waitFor } from '../conformance/wait-for.js';
import { drained, framesCommitted } from './fault-harness.js';

const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');
const execute = promisify(execFile);
const skipReason = kafkaUnavailableReason() ?? (existsSync(clip) ? undefined : `${clip} is missing`);

/** Users' view of the results: frames stored, and detections per frame and class. */
const QUERIES = {
  frames: "SELECT count() AS n FROM frames WHERE source = 'road'",
  detections: "SELECT frame_seq, class, count() AS n FROM detections WHERE source = 'road' GROUP BY frame_seq, class ORDER BY frame_seq, class",
};
type Results = Record<keyof typeof QUERIES, unknown[]>;

function panoptesArgs(...args: string[]): string[] {
  return ['--import', 'tsx', join(root, 'cli/main.ts'), ...args];
}

function deployment(dir: string, bus: 'memory' | 'kafka', speed: number | 'max'): string {
  const file = join(dir, `${bus}.yaml`);
  writeFileSync(
    file,
    [
      `models: ${join(root, 'configs/models.yaml')}`,
      `apps: [${join(root, 'configs/apps/traffic.yaml')}]`,
      `bus: { kind: ${bus}, partitions: 4 }`,
      'sources:',
      `  - { id: road, path: ${clip}, apps: [traffic], fps: 5, speed: ${speed} }`,
    ].join('\n'),
  );
  return file;
}

async function query(dataDir: string): Promise<Results> {
  const results = {} as Results;
  for (const [name, sql] of Object.entries(QUERIES)) {
    const { stdout } = await execute(process.execPath, panoptesArgs('query', sql, '--format', 'json', '--data-dir', dataDir), { cwd: root, maxBuffer: 64 << 20 });
    results[name as keyof Results] = JSON.parse(stdout) as unknown[];
  }
  return results;
}

/** One `panoptes run --roles <role>` process. */
class RoleProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  private output = '';

  constructor(role: string, file: string, dataDir: string, brokers: string) {
    this.child = spawn(process.execPath, panoptesArgs('run', file, '--roles', role, '--data-dir', dataDir), {
      cwd: root,
      env: { ...process.env, PANOPTES_KAFKA_BROKERS: brokers, PANOPTES_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-20_000);
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  /** SIGTERM: finish what it holds, then exit 0. */
  async stop(): Promise<void> {
    this.child.kill('SIGTERM');
    const code = await this.exited;
    expect(code, this.output).toBe(0);
  }

  async succeeded(): Promise<void> {
    const code = await this.exited;
    expect(code, this.output).toBe(0);
  }
}


/** Messages on `topic` so far, all partitions: 0 while the topic is not there yet. */
async function published(brokers: string, topic: string): Promise<number> {
  const bus = await createKafkaBus({ brokers: [brokers], logger: silentLogger(), connectionRetryMs: 2_000 });
  try {
    return (await bus.endOffsets(topic)).reduce((sum, p) => sum + Math.max(0, p.offset), 0);
  } catch {
    return 0;
  } finally {
    await bus.close();
  }
}

describe.skipIf(skipReason !== undefined)(`pipeline across processes on Kafka${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-kafka-it-'));
  const brokers: KafkaBroker[] = [];
  let embedded: Results;
  let frames: number;

  const broker = async (): Promise<KafkaBroker> => {
    const started = await startKafkaBroker({ dataDir: mkdtempSync(join(dir, 'broker-')) });
    brokers.push(started);
    return started;
  };

  beforeAll(async () => {
    const dataDir = join(dir, 'embedded');
    await execute(process.execPath, panoptesArgs('run', deployment(dir, 'memory', 'max'), '--data-dir', dataDir), { cwd: root, maxBuffer: 64 << 20 });
    embedded = await query(dataDir);
    frames = (embedded.frames[0] as { n: number }).n;
    expect(frames).toBeGreaterThanOrEqual(150); // 30 s at 5 fps
    expect(embedded.detections.length).toBeGreaterThan(20); // cars pass on about a third of the frames
  }, 180_000);

  afterAll(async () => {
    await Promise.all(brokers.map((b) => b.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs ingest, backend and sink as three processes and stores what the embedded run stores', async () => {
    const { brokers: address } = await broker();
    const dataDir = join(dir, 'three');
    const file = deployment(dir, 'kafka', 'max');
    const sink = new RoleProcess('sink', file, dataDir, address);
    const backend = new RoleProcess('backend', file, dataDir, address);
    await new RoleProcess('ingest', file, dataDir, address).succeeded();
    await drained(address);
    await Promise.all([backend.stop(), sink.stop()]);
    expect(await query(dataDir)).toEqual(embedded);
  }, 240_000);

  it('loses nothing and duplicates nothing when the backend is killed with SIGKILL mid-replay', async () => {
    const { brokers: address } = await broker();
    const dataDir = join(dir, 'killed');
    const file = deployment(dir, 'kafka', 'max');
    const sink = new RoleProcess('sink', file, dataDir, address);
    const doomed = new RoleProcess('backend', file, dataDir, address);
    const ingest = new RoleProcess('ingest', file, dataDir, address);
    await waitFor(async () => (await framesCommitted(address)) >= 30, 'the backend to commit some frames', { timeoutMs: 120_000, intervalMs: 200 });
    doomed.child.kill('SIGKILL');
    await doomed.exited;
    const committedAtKill = await framesCommitted(address);
    expect(committedAtKill).toBeLessThan(frames); // it died mid-replay

    const backend = new RoleProcess('backend', file, dataDir, address);
    await ingest.succeeded();
    await drained(address);
    await Promise.all([backend.stop(), sink.stop()]);
    expect(await query(dataDir)).toEqual(embedded);
  }, 240_000);

  it('reconnects and loses no published frame when the broker restarts mid-run', async () => {
    const kafka = await broker();
    const dataDir = join(dir, 'restarted');
    const file = deployment(dir, 'kafka', 2); // 30 s of footage published over ~15 s
    const sink = new RoleProcess('sink', file, dataDir, kafka.brokers);
    const backend = new RoleProcess('backend', file, dataDir, kafka.brokers);
    // Ingest starts once the backend runs (its first stats are out): a backend slow to start
    // under load would otherwise find the replay over before the broker stops.
    await waitFor(async () => (await published(kafka.brokers, Topics.stats)) > 0, 'the backend to start', { timeoutMs: 120_000, intervalMs: 200 });
    const ingest = new RoleProcess('ingest', file, dataDir, kafka.brokers);
    await waitFor(async () => (await framesCommitted(kafka.brokers)) >= 1, 'the backend to commit a frame', { timeoutMs: 120_000, intervalMs: 200 });

    expect(ingest.child.exitCode, 'ingest still publishing when the broker stops').toBeNull();
    await kafka.stop();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const again = await startKafkaBroker({ dataDir: kafka.dataDir, port: kafka.port, controllerPort: kafka.controllerPort });
    brokers.push(again);

    await ingest.succeeded();
    await drained(again.brokers);
    await Promise.all([backend.stop(), sink.stop()]);
    expect(await query(dataDir)).toEqual(embedded);
  }, 300_000);
});
