import { cpus, hostname, totalmem } from 'node:os';
import {
  Groups,
  Channels,
  createLogThrottle,
  repeatedSuffix,
  type AppLogic,
  type Bus,
  type FrameRef,
  type Lifecycle,
  type Logger,
  type NodeOutput,
  type Plan,
  type ResolvedModel,
  type ResultRow,
  type Stats,
} from '../../core/index.js';
import { createDagRunner, DeadlineMissed, type DagNode, type SnapshotStore, type StageBudgets } from '../dag/index.js';
import type { ImageInput } from '../image/index.js';
import type { Executed, Prepared } from '../models/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { createExecutor } from './executor.js';
import { createHosting, type Request } from './hosting.js';
import { createIntake } from './intake.js';
import { emptyTally, Outbox } from './outbox.js';
import { createPlanFollower } from './plan-follower.js';
import { createSpecializedNodes } from './specialized-nodes.js';
import type { BatchingPolicy } from './session-queue.js';
import { createStatsWindow } from './stats-window.js';

export interface BackendOptions {
  id: string;
  bus: Bus;
  runtime: ModelRuntime;
  models: Readonly<Record<string, ResolvedModel>>;
  apps: readonly AppLogic[];
  /** Which apps analyze a source's frames. */
  appsForSource: (source: string) => readonly string[];
  /** Target batch of a model's own session (before any plan, or for a node no plan hosts here): images per run, at most; one for every model, or per model. */
  batch: number | ((model: string) => number);
  /**
   * Whether a source's frames on the live topics must meet their app's SLO: those are dropped
   * early when they cannot. Frames and crops on the backfill topics (replays faster than real
   * time, which ingest workers publish there) are delay-tolerant whatever this says: never
   * dropped for time, served in the time real-time work leaves. Default: all real-time.
   */
  realtime?: (source: string) => boolean;
  /** How a session's batch is formed: @defaultValue 'early' (Nexus's sliding window); 'tardy' is Our-Tardy (edge scheduling); 'lazy' is Clipper's, the baseline. */
  batching?: BatchingPolicy;
  /** With 'tardy': models run in this many stages, Our-Tardy choosing each step (group-wise execution, staged-queue.ts). @defaultValue 1 (whole) */
  stages?: number;
  /** Size delay-tolerant batches to leave the device before the next real-time batch (plan-ahead.ts). @defaultValue true */
  planAhead?: boolean;
  /** Stats go to `panoptes.stats` this often, ms. @defaultValue 1000 */
  statsIntervalMs?: number;
  /**
   * A source no frame has come from for this long (a replay that ended, a camera gone) has what
   * its operators hold written (tracks in view, stays in zones), and is forgotten. @defaultValue 60000
   */
  idleSourceMs?: number;
  /** Called with each interval's stats too (for metrics). */
  onStats?: (stats: Stats) => void;
  logger: Logger;
  groupId?: string;
  /** The accelerator this backend runs on, announced in its stats. @defaultValue this host's CPUs */
  device?: NonNullable<Stats['device']>;
  /** Where pictures of events are kept; absent, events have none. */
  snapshots?: SnapshotStore;
}

export interface BackendStatus {
  state: 'idle' | 'running' | 'draining' | 'closed';
  frames: number;
  tasks: number;
  rows: number;
  /** Rows published per table. */
  rowsByTable: Record<string, number>;
  drops: number;
  /** Drops by reason (`deadline`, `decode`, ...). */
  dropsByReason: Record<string, number>;
  /** Requests whose output came after their deadline. */
  late: number;
  batches: number;
  imagesRun: number;
  /** First-node outputs an ingest worker made itself (collaborative processing), used instead of running the node here. */
  localOutputs: number;
  /** The epoch of the plan followed; undefined before the first. */
  planEpoch?: number;
  /** Partitions of its topics this backend consumes now. */
  partitions: number;
  /** Models loaded now. */
  models: string[];
}

/** Each app's stage budgets in a plan: a session's SLO is the budget of every node it serves. */
function budgetsIn(plan: Plan): Map<string, Record<string, number>> {
  const byApp = new Map<string, Record<string, number>>();
  for (const session of plan.sessions) {
    for (const { app, node } of session.nodes ?? []) byApp.set(app, { ...byApp.get(app), [node]: session.sloMs });
  }
  return byApp;
}

/**
 * The model-execution role, in four parts: the intake consumes frames and the crops (tasks) for
 * the models it hosts and decodes them; the DAG runner carries each through its app's nodes,
 * with deadlines from the plan's stage budgets; hosting runs each node in batches that mix the
 * requests of every stream and app, in the sessions the plan follower puts in force; the outbox
 * publishes rows, drops and child tasks before the messages that made them are committed.
 */
export function createBackend(options: BackendOptions): Lifecycle<BackendStatus> {
  const logger = options.logger.child({ module: 'analyzers.backend', backend: options.id });
  const groupId = options.groupId ?? Groups.backend;
  let state: BackendStatus['state'] = 'idle';
  const counts = { late: 0, batches: 0, imagesRun: 0 };
  let planEpoch: number | undefined;
  /** Stage budgets of the plan in force, per app and node; an app the plan leaves out splits its SLO evenly. */
  let budgets = new Map<string, StageBudgets>();
  const tally = emptyTally();
  const producer = options.bus.producer();
  const executor = createExecutor<Request, Prepared, Executed>({
    policy: options.batching ?? 'early',
    planAhead: options.planAhead ?? true,
    lanes: options.runtime.lanes,
    now: Date.now,
    onDrop: (_, dropped) => {
      for (const r of dropped) r.item.reject(new DeadlineMissed());
    },
  });
  const ownBatch = options.batch;
  const batchOf = typeof ownBatch === 'number' ? () => ownBatch : ownBatch;
  const stats = createStatsWindow(options.id, Date.now());
  const stages = options.batching === 'tardy' ? (options.stages ?? 1) : 1;
  if (!Number.isInteger(stages) || stages < 1 || stages > 16) throw new RangeError(`backend stages must be an integer 1..16, got ${options.stages}`);
  const hosting = createHosting({
    backend: options.id,
    models: options.models,
    runtime: options.runtime,
    executor,
    batch: batchOf,
    stages,
    modelOf: (app, node) => options.apps.find((a) => a.spec.name === app)?.spec.nodes.find((n) => n.id === node)?.model,
    onBatch: (session, size) => {
      stats.batch(session, size);
      counts.batches += 1;
      counts.imagesRun += size;
    },
    logger,
  });

  /** Queues one image for its node's session; resolves with the image's output when its batch finishes. */
  const infer = async ({ app, node, model }: DagNode, image: ImageInput, params: unknown, deadlineMs: number, frame?: FrameRef): Promise<NodeOutput> => {
    const session = await hosting.serving(app, node, model);
    const submitted = Date.now();
    stats.arrival(session);
    try {
      const output = await new Promise<NodeOutput>((resolve, reject) => hosting.enqueue(session, { deadlineMs, item: { image, model, params, ...(frame ? { stream: `${app}/${node}/${frame.source}` } : {}), resolve, reject } }));
      const done = Date.now();
      stats.done(session, done - submitted, done > deadlineMs, app);
      if (done > deadlineMs) counts.late += 1;
      return output;
    } catch (err) {
      if (err instanceof DeadlineMissed) stats.dropped(session, 1, app);
      throw err;
    }
  };

  const parseParams = async (model: string, params: Record<string, unknown>): Promise<unknown> => (await hosting.runner(model)).parseParams(params);
  const specialized = createSpecializedNodes({ apps: options.apps, runtime: options.runtime, infer, parseParams, latency: (model) => hosting.perInputMs(model), logger });

  /** A full disk fails every picture: said once, then counted. */
  const snapshotFailures = createLogThrottle(30_000);
  const realtime = options.realtime ?? (() => true);
  const runner = createDagRunner({
    apps: options.apps,
    parseParams,
    infer: (node, image, params, deadlineMs, frame) => (specialized.specializes(node) ? specialized.classify(node, image, params, deadlineMs, frame) : infer(node, image, params, deadlineMs, frame)),
    budgets: (app) => budgets.get(app),
    realtime,
    crops: options.bus.kind === 'memory' ? 'pixels' : 'jpeg',
    onFanOut: (app, from, to, children) => stats.fannedOut(app, from, to, children),
    ...(options.snapshots ? { snapshots: options.snapshots, onSnapshotError: (err: unknown) => snapshotFailures.log('snapshot', (repeats) => logger.warn({ err }, `an event's picture could not be kept; its row has none${repeatedSuffix(repeats, 30_000)}`)) } : {}),
  });
  const intake = createIntake({
    id: options.id,
    bus: options.bus,
    groupId,
    runner,
    appsForSource: options.appsForSource,
    batchOf,
    producer,
    tally,
    onFrame: (apps, source, backfill) => {
      const delayTolerant = backfill || !realtime(source);
      for (const app of apps) stats.frame(app, delayTolerant);
    },
    logger,
  });

  /**
   * A newer plan: its sessions are built first; where it routes a group's partitions
   * differently, the intake leaves that group before they run and joins again after, so the
   * group's leader deals partitions by the new weights.
   */
  const follow = async (next: Plan): Promise<void> => {
    try {
      await hosting.follow(next, async () => {
        if (state === 'running') await intake.leaveFor(next);
      });
      budgets = budgetsIn(next);
    } finally {
      // Back in every group even when the plan could not be followed in full, or a group failed to leave.
      if (state === 'running') await intake.join(next);
    }
    planEpoch = next.epoch;
  };
  const plans = createPlanFollower({ id: options.id, bus: options.bus, groupId, follow, logger });

  const device = options.device ?? { kind: 'cpu', name: cpus()[0]?.model ?? 'cpu', memoryMB: Math.round(totalmem() / 2 ** 20), host: hostname() };
  /** A broker away fails every second's stats: said once, then counted every 30 s. */
  const statsFailures = createLogThrottle(30_000);
  /** The last interval's stats to `panoptes.stats`; a failed send is logged, the next second brings another. */
  const publishStats = async (): Promise<void> => {
    const specializations = specialized.stats();
    const caches = hosting.cacheStats().map(({ key, ...figures }) => {
      // Keys are `app/node/source`; source ids may hold slashes, app and node ids do not.
      const [app = '', node = '', ...source] = key.split('/');
      return { app, node, source: source.join('/'), ...figures };
    });
    const snapshot = {
      ...stats.take(Date.now(), executor.queued()),
      device,
      ...(specializations.length > 0 ? { specializations } : {}),
      ...(caches.length > 0 ? { caches } : {}),
    };
    options.onStats?.(snapshot);
    await producer
      .send(Channels.stats.topic, [Channels.stats.record(snapshot)])
      .catch((err: unknown) => statsFailures.log('stats', (repeats) => logger.warn({ err, repeats }, repeats === 0 ? 'stats not published' : `stats not published ${repeats} more times in the last 30 s`)));
  };
  let statsTimer: NodeJS.Timeout | undefined;

  /** Rows the operators held, written now. */
  const writeHeld = async (rows: readonly ResultRow[]): Promise<void> => {
    if (rows.length === 0) return;
    const out = new Outbox(`backend:${options.id}`, tally, logger);
    for (const row of rows) out.row(row);
    await out.send(producer);
  };
  const writeIdleSources = (): Promise<void> => writeHeld(options.apps.flatMap((app) => app.flushIdle(options.idleSourceMs ?? 60_000)));

  return {
    async start() {
      await runner.start();
      await hosting.start([...runner.models(), ...specialized.templates()]);
      state = 'running';
      await intake.join(undefined);
      await plans.start();
      statsTimer = setInterval(() => {
        void publishStats();
        hosting.unloadIdle().catch((err: unknown) => logger.warn({ err }, 'model unload failed'));
        writeIdleSources().catch((err: unknown) => logger.warn({ err }, 'rows of idle sources not written'));
      }, options.statsIntervalMs ?? 1000);
    },
    async drain() {
      state = 'draining';
      await plans.stop();
      intake.pause();
      await executor.drain();
      // What the operators still hold (tracks in view at the end of a replay) is written now.
      await writeHeld(options.apps.flatMap((app) => app.flush()));
      // The figures after the last outcomes: a cascade's fall-through counts only once the oracle has answered.
      await publishStats();
    },
    async close() {
      state = 'closed';
      clearInterval(statsTimer);
      statsFailures.close();
      snapshotFailures.close();
      await plans.close();
      await intake.close();
      await producer.close();
      await specialized.close();
      await hosting.close();
    },
    status: () => ({
      state,
      ...intake.counts(),
      ...counts,
      ...tally,
      rowsByTable: { ...tally.rowsByTable },
      dropsByReason: { ...tally.dropsByReason },
      localOutputs: runner.localOutputs(),
      ...(planEpoch !== undefined ? { planEpoch } : {}),
      partitions: intake.partitions(),
      models: hosting.models(),
    }),
  };
}
