/**
 * What the fault suites (fault-*.test.ts) share: a deployment of one short synthetic clip
 * through a one-model app on Kafka, storing into a ClickHouse server; ingest, backend, sink (and
 * scheduler) as separate `panoptes run --roles <role>` processes; and the SQL that proves every
 * frame ingested has its rows or a `drops` row. Servers are the suite's own, on 127.0.0.1, so
 * killing and wiping them disturbs no other test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { expect } from 'vitest';
import { waitUntilConsumed } from '../../cli/adapters.js';
import { createKafkaBus, Groups, projectRoot, silentLogger, Topics } from '../../core/index.js';
import { clickhouseUnavailableReason } from '../../tools/clickhouse/index.js';
import { kafkaUnavailableReason } from '../../tools/kafka/index.js';

const root = projectRoot();

/**
 * Why the fault suite cannot run here (no java/mvn, no clickhouse-server), or undefined. Where CI
 * requires the servers (PANOPTES_KAFKA_REQUIRED=1 / PANOPTES_CLICKHOUSE_REQUIRED=1), it fails instead.
 */
export function faultSkipReason(): string | undefined {
  const reason = kafkaUnavailableReason() ?? clickhouseUnavailableReason();
  const required = process.env.PANOPTES_KAFKA_REQUIRED === '1' || process.env.PANOPTES_CLICKHOUSE_REQUIRED === '1';
  if (reason && required) throw new Error(`the fault suite is required here but cannot run: ${reason}`);
  return reason;
}

/** The clip: 16 s of ffmpeg's test card at 2 fps (32 frames), paced like a live camera. */
export const SOURCE = 'cam';
export const CLIP_FRAMES = 32;

/**
 * A deployment file for one case: its own database on the suite's server, so cases never mix
 * rows. A long SLO: a frame waiting for a restarted backend is late, never dropped for time, so
 * every case that loses nothing stores what the clean run stores.
 */
export function writeDeployment(dir: string, database: string, options: { scheduler?: boolean } = {}): string {
  const app = join(dir, 'faults-app.yaml');
  writeFileSync(
    app,
    ['name: faults', 'sloMs: 120000', 'nodes:', '  - id: detect', '    model: centernet', '    params: { minScore: 0.2 }', 'edges:', '  - from: frames', '    to: detect'].join('\n'),
  );
  const file = join(dir, `${database}.yaml`);
  writeFileSync(
    file,
    [
      `models: ${join(root, 'configs/models.yaml')}`,
      `apps: [${app}]`,
      'bus: { kind: kafka, partitions: 2 }',
      `sink: { kind: clickhouse, database: ${database}, flushMs: 200 }`,
      'backend: { threads: 1 }',
      ...(options.scheduler ? [`scheduler: { profiles: ${join(root, 'profiles')}, epochS: 2, minEpochS: 1 }`] : []),
      'sources:',
      `  - id: ${SOURCE}`,
      '    synthetic: { lavfi: "testsrc2=size=320x180:rate=10", durationS: 16 }',
      '    apps: [faults]',
      '    fps: 2',
      '    speed: 1',
    ].join('\n'),
  );
  return file;
}

/** One `panoptes run --roles <role>` process, its output kept for assertions and failures. */
export class RoleProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  output = '';

  constructor(
    readonly role: string,
    file: string,
    dataDir: string,
    env: { brokers: string; clickhouse: string },
  ) {
    this.child = spawn(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), 'run', file, '--roles', role, '--data-dir', dataDir], {
      cwd: root,
      env: { ...process.env, PANOPTES_KAFKA_BROKERS: env.brokers, PANOPTES_CLICKHOUSE_URL: env.clickhouse, PANOPTES_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // A role must not outlive the test run, even one that ends without its teardown.
    const killOnExit = (): void => void this.child.kill('SIGKILL');
    process.on('exit', killOnExit);
    this.child.once('exit', () => process.off('exit', killOnExit));
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-200_000);
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        // PANOPTES_FAULT_LOGS=<dir> keeps each process's output there, for looking into a case.
        const logs = process.env.PANOPTES_FAULT_LOGS;
        if (logs) writeFileSync(join(logs, `${basename(file, '.yaml')}-${role}-${this.child.pid}.log`), this.output);
        resolve(code ?? (signal ? -1 : null));
      }),
    );
  }

  /** SIGTERM; resolves with how long it took to exit, in ms, once it exited with 0. */
  async stop(): Promise<number> {
    const started = Date.now();
    this.child.kill('SIGTERM');
    const code = await this.exited;
    expect(code, `${this.role}:\n${this.output.slice(-5_000)}`).toBe(0);
    return Date.now() - started;
  }

  /** SIGTERM; resolves with how long it took to exit, in ms, and its exit code. */
  async terminate(): Promise<{ ms: number; code: number | null }> {
    const started = Date.now();
    this.child.kill('SIGTERM');
    const code = await this.exited;
    return { ms: Date.now() - started, code };
  }

  /** SIGKILL, as a crash: nothing is finished or committed. */
  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }

  async succeeded(): Promise<void> {
    const code = await this.exited;
    expect(code, `${this.role}:\n${this.output.slice(-5_000)}`).toBe(0);
  }

  /** Frames an ingest process says it published, from its summary ("  cam: 32 frames"). */
  framesPublished(): number {
    const match = new RegExp(`^\\s+${SOURCE}: (\\d+) frames`, 'm').exec(this.output);
    if (!match) throw new Error(`no frame count in the ${this.role} output:\n${this.output.slice(-5_000)}`);
    return Number(match[1]);
  }

  /** Log lines matching `pattern`. */
  lines(pattern: RegExp): number {
    return this.output.split('\n').filter((line) => pattern.test(line)).length;
  }
}

/** Waits until the backends have committed every frame and the sink every row and drop. */
export async function drained(brokers: string): Promise<void> {
  const bus = await createKafkaBus({ brokers: [brokers], logger: silentLogger() });
  try {
    // Replays at more than real time publish on the backfill topic.
    await waitUntilConsumed(bus, Groups.backend, [Topics.frames, Topics.backfillFrames]);
    await waitUntilConsumed(bus, Groups.sink, [Topics.results, Topics.drops]);
  } finally {
    await bus.close();
  }
}

/** Frames the backends have committed so far, live and backfill (0 while the group or topic is not there). */
export async function framesCommitted(brokers: string): Promise<number> {
  const bus = await createKafkaBus({ brokers: [brokers], logger: silentLogger(), connectionRetryMs: 2_000 });
  try {
    let committed = 0;
    for (const topic of [Topics.frames, Topics.backfillFrames]) {
      committed += (await bus.committed(Groups.backend, topic).catch(() => [])).reduce((sum, p) => sum + Math.max(0, p.offset), 0);
    }
    return committed;
  } catch {
    return 0;
  } finally {
    await bus.close();
  }
}

/** One number from the server, e.g. `SELECT count() FROM frames`. */
export async function scalar(url: string, database: string, sql: string): Promise<number> {
  const response = await fetch(`${url}/?database=${database}`, { method: 'POST', body: sql });
  const text = (await response.text()).trim();
  if (!response.ok || !/^\d+$/.test(text)) throw new Error(`${sql}: ${text}`);
  return Number(text);
}

/** Rows as TSV lines, for comparing a case's results with the clean run's. */
export async function lines(url: string, database: string, sql: string): Promise<string[]> {
  const response = await fetch(`${url}/?database=${database}`, { method: 'POST', body: sql });
  const text = await response.text();
  if (!response.ok) throw new Error(`${sql}: ${text}`);
  return text.split('\n').filter(Boolean);
}

/** What users see: frames stored, detections per frame and class (as the kafka-pipeline test compares). */
export async function results(url: string, database: string): Promise<{ frames: number; detections: string[] }> {
  return {
    frames: await scalar(url, database, `SELECT count() FROM frames WHERE source = '${SOURCE}'`),
    detections: await lines(url, database, `SELECT frame_seq, class, count() FROM detections WHERE source = '${SOURCE}' GROUP BY frame_seq, class ORDER BY frame_seq, class`),
  };
}

/**
 * The accounting of a case: of the frames 0..ingested-1, how many have a `frames` row, how many
 * only a drop, and how many neither (must be 0: that frame was lost without a record).
 */
export async function accounting(url: string, database: string, ingested: number): Promise<{ stored: number; droppedOnly: number; unaccounted: number; drops: number }> {
  const stored = `SELECT toInt64(frame_seq) FROM frames WHERE source = '${SOURCE}'`;
  const dropped = `SELECT toInt64(frame_seq) FROM drops WHERE source = '${SOURCE}' AND frame_seq >= 0`;
  const seqs = `(SELECT toInt64(number) AS seq FROM system.numbers LIMIT ${ingested})`;
  return {
    stored: await scalar(url, database, `SELECT count() FROM ${seqs} WHERE seq IN (${stored})`),
    droppedOnly: await scalar(url, database, `SELECT count() FROM ${seqs} WHERE seq NOT IN (${stored}) AND seq IN (${dropped})`),
    unaccounted: await scalar(url, database, `SELECT count() FROM ${seqs} WHERE seq NOT IN (${stored}) AND seq NOT IN (${dropped})`),
    drops: await scalar(url, database, 'SELECT count() FROM drops'),
  };
}
