import { randomUUID } from 'node:crypto';
import { cpus, hostname, totalmem } from 'node:os';
import {
  createLogThrottle,
  deadLetter,
  describeError,
  dropContract,
  ErrorCode,
  PanoptesError,
  frameContract,
  frameId,
  outputId,
  planContract,
  planWeights,
  resultRowContract,
  routingAssigner,
  statsContract,
  taskContract,
  Topics,
  type AppEdge,
  type AppLogic,
  type AppNode,
  type Batch,
  type Box,
  type Bus,
  type BusMessage,
  type Consumer,
  type Drop,
  type FrameRef,
  type Lifecycle,
  type Logger,
  type NodeOutput,
  type Plan,
  type ProducerRecord,
  type ResolvedModel,
  type Stats,
  type Task,
} from '../../core/index.js';
import { decodeJpeg, encodeJpeg, jpegImage, pixelsOf, type ImageInput, type RgbImage } from '../image/index.js';
import { cropImage, type Executed, type Prepared } from '../models/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { cropRegion, passesFilter, shiftBox, shiftOutput } from './edges.js';
import { createExecutor } from './executor.js';
import { createHosting, type Request } from './hosting.js';
import type { DropPolicy } from './session-queue.js';
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
   * Whether a source's frames must meet their app's SLO (live, or replayed at speed 1): those
   * are dropped early when they cannot. Other sources (replays faster than real time) are
   * delay-tolerant: never dropped for time, served after the real-time ones. Default: all real-time.
   */
  realtime?: (source: string) => boolean;
  /** @defaultValue 'early' (Nexus); 'lazy' is Clipper's, the baseline. */
  dropPolicy?: DropPolicy;
  /** Stats go to `panoptes.stats` this often, ms. @defaultValue 1000 */
  statsIntervalMs?: number;
  /** Called with each interval's stats too (for metrics). */
  onStats?: (stats: Stats) => void;
  logger: Logger;
  groupId?: string;
  /** The accelerator this backend runs on, announced in its stats. @defaultValue this host's CPUs */
  device?: NonNullable<Stats['device']>;
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

/** A node of an app's DAG, ready to run: its checked params and the edges leaving it. */
interface PlannedNode {
  app: AppLogic;
  node: AppNode;
  params: unknown;
  children: { edge: AppEdge; node: AppNode }[];
}

/** One image for one node: a whole frame, or a crop of it at `offset`. */
interface Work {
  planned: PlannedNode;
  frame: FrameRef;
  /** Handed to the model as it is: a JPEG is decoded by the model's pre-processing, at the model's size. */
  image: ImageInput;
  /** The same image as pixels, for the crops of a region or of child stages (decoded already where a crop is planned). */
  pixels: () => Promise<RgbImage>;
  offset: { x: number; y: number };
  inputId: string;
  lineage: string[];
  deadlineMs: number;
  /** The node's output, made already by the ingest worker (collaborative processing). */
  localOutput?: NodeOutput;
  /** Rows wait for this: the previous frame of the batch, so operators see a source's frames in order. */
  after?: Promise<unknown>;
}

/** A task's raw pixels, checked against the size it says. */
function rawImage({ width, height }: { width: number; height: number }, data: Uint8Array): RgbImage {
  if (data.length !== width * height * 3) {
    throw new PanoptesError(ErrorCode.ImageDecode, `a ${width}x${height} RGB crop needs ${width * height * 3} bytes, got ${data.length}`);
  }
  return { width, height, data };
}

/** The part of an input image a node's region (fractions of it) names, and where it lies in the frame. */
function regionOf(image: RgbImage, offset: { x: number; y: number }, region: Box): { image: RgbImage; offset: { x: number; y: number } } {
  const box = { x1: Math.floor(region.x1 * image.width), y1: Math.floor(region.y1 * image.height), x2: Math.ceil(region.x2 * image.width), y2: Math.ceil(region.y2 * image.height) };
  return { image: cropImage(image, box), offset: { x: offset.x + box.x1, y: offset.y + box.y1 } };
}

/** The fewest messages a backend's consumer takes at once (see `messagesPerFetch`). */
const MIN_MESSAGES_PER_FETCH = 16;

/** What handling one batch publishes, by topic; sent once the whole batch is handled. */
type Outbox = Map<string, ProducerRecord[]>;

function post(out: Outbox, topic: string, record: ProducerRecord): void {
  const records = out.get(topic);
  if (records) records.push(record);
  else out.set(topic, [record]);
}

/** Why a request got no output: its deadline could no longer be met. */
class DeadlineMissed extends Error {
  constructor() {
    super('dropped early: it could not finish by its deadline');
  }
}

/** Topics of the crops a set of apps sends to nodes below their roots. */
export function taskTopics(apps: readonly AppLogic[]): string[] {
  const topics = apps.flatMap((app) =>
    app.spec.edges.filter((e) => e.from !== 'frames').map((e) => Topics.tasks(app.spec.nodes.find((n) => n.id === e.to)!.model)),
  );
  return [...new Set(topics)];
}

/**
 * The model-execution role: consumes frames and the crops (tasks) for the models it hosts,
 * runs each node in batches that mix the requests of every stream and app, turns outputs into
 * rows with the app logic, and sends a task down each edge whose filter an output passes.
 * A message is committed only after its rows, drops and child tasks are published.
 */
export function createBackend(options: BackendOptions): Lifecycle<BackendStatus> {
  const logger = options.logger.child({ module: 'analyzers.backend', backend: options.id });
  const status: Omit<BackendStatus, 'partitions' | 'models'> = { state: 'idle', frames: 0, tasks: 0, rows: 0, rowsByTable: {}, drops: 0, dropsByReason: {}, late: 0, batches: 0, imagesRun: 0, localOutputs: 0 };
  const producer = options.bus.producer();
  const executor = createExecutor<Request, Prepared, Executed>({
    policy: options.dropPolicy ?? 'early',
    lanes: options.runtime.lanes,
    now: Date.now,
    onDrop: (_, dropped) => {
      for (const r of dropped) r.item.reject(new DeadlineMissed());
    },
  });
  const ownBatch = options.batch;
  const batchOf = typeof ownBatch === 'number' ? () => ownBatch : ownBatch;
  const stats = createStatsWindow(options.id, Date.now());
  const hosting = createHosting({
    backend: options.id,
    models: options.models,
    runtime: options.runtime,
    executor,
    batch: batchOf,
    onBatch: (session, size) => {
      stats.batch(session, size);
      status.batches += 1;
      status.imagesRun += size;
    },
    logger,
  });
  /** Queues one image for its node's session; resolves with the image's output when its batch finishes. */
  const infer = async ({ app, node }: PlannedNode, image: ImageInput, params: unknown, deadlineMs: number): Promise<NodeOutput> => {
    const session = await hosting.serving(app.spec.name, node.id, node.model);
    const submitted = Date.now();
    stats.arrival(session);
    try {
      const output = await new Promise<NodeOutput>((resolve, reject) => hosting.enqueue(session, { deadlineMs, item: { image, params, resolve, reject } }));
      const done = Date.now();
      stats.done(session, done - submitted, done > deadlineMs);
      if (done > deadlineMs) status.late += 1;
      return output;
    } catch (err) {
      if (err instanceof DeadlineMissed) stats.dropped(session);
      throw err;
    }
  };
  const realtime = options.realtime ?? (() => true);
  const nodes = new Map<string, PlannedNode>(); // key: app/node
  const roots = new Map<string, PlannedNode[]>(); // key: app; the nodes fed by frames
  const topics = [Topics.frames, ...taskTopics(options.apps)];
  let consumer: Consumer | undefined;
  let statsTimer: NodeJS.Timeout | undefined;

  /** A broker away fails every second's stats: said once, then counted every 30 s. */
  const statsFailures = createLogThrottle(30_000);
  /** The last interval's stats to `panoptes.stats`; a failed send is logged, the next second brings another. */
  const publishStats = (): void => {
    const snapshot = { ...stats.take(Date.now(), executor.queued()), device };
    options.onStats?.(snapshot);
    producer
      .send(Topics.stats, [{ key: options.id, value: statsContract.encode(snapshot), headers: statsContract.headers }])
      .catch((err: unknown) => statsFailures.log('stats', (repeats) => logger.warn({ err, repeats }, repeats === 0 ? 'stats not published' : `stats not published ${repeats} more times in the last 30 s`)));
  };

  const dropRecord = (what: Drop['what'], why: string, detail: string, at: { source?: string; seq?: number }): ProducerRecord => {
    status.drops += 1;
    status.dropsByReason[why] = (status.dropsByReason[why] ?? 0) + 1;
    // Deadline drops are how a loaded backend keeps up: counted and stored, not shouted.
    logger[why === 'deadline' ? 'debug' : 'warn']({ source: at.source, seq: at.seq, why, detail }, `${what} dropped`);
    const message: Drop = { what, where: `backend:${options.id}`, why, detail, atMs: Date.now() };
    if (at.source !== undefined) message.source = at.source;
    if (at.seq !== undefined) message.frameSeq = at.seq;
    return { key: at.source ?? 'unknown', value: dropContract.encode(message), headers: dropContract.headers };
  };
  const drop = (out: Outbox, ...args: Parameters<typeof dropRecord>): void => {
    post(out, Topics.drops, dropRecord(...args));
  };

  const runNode = async (work: Work, out: Outbox): Promise<void> => {
    const { planned, frame } = work;
    const { app, node } = planned;
    let output: NodeOutput;
    let part: ReturnType<typeof regionOf> | undefined;
    try {
      // A node with a region runs on that part of its input only (a HUD's corner).
      if (node.region) part = regionOf(await work.pixels(), work.offset, node.region);
    } catch (err) {
      drop(out, work.lineage.length === 0 ? 'frame' : 'task', 'image-decode', `${app.spec.name}/${node.id}: ${describeError(err)}`, { source: frame.source, seq: frame.seq });
      return;
    }
    const { image, offset } = part ?? work;
    const pixels = part ? () => Promise.resolve(part.image) : work.pixels;
    try {
      if (work.localOutput) status.localOutputs += 1;
      output = work.localOutput ?? (await infer(planned, image, planned.params, realtime(frame.source) ? work.deadlineMs : Infinity));
    } catch (err) {
      const why = err instanceof DeadlineMissed ? 'deadline' : 'model-failed';
      drop(out, work.lineage.length === 0 ? 'frame' : 'task', why, `${app.spec.name}/${node.id}: ${describeError(err)}`, { source: frame.source, seq: frame.seq });
      return;
    }
    // Boxes from a crop are moved into frame pixels before anyone sees them.
    if (offset.x !== 0 || offset.y !== 0) output = shiftOutput(output, offset);
    await work.after;
    for (const row of app.rowsFor({ node, frame, output, inputId: work.inputId, root: work.lineage.length === 0 })) {
      status.rowsByTable[row.table] = (status.rowsByTable[row.table] ?? 0) + 1;
      post(out, Topics.results, { key: frame.source, value: resultRowContract.encode(row), headers: resultRowContract.headers });
    }
    if (output.kind !== 'detections' || planned.children.length === 0) return;
    let whole: RgbImage;
    try {
      whole = await pixels();
    } catch (err) {
      drop(out, work.lineage.length === 0 ? 'frame' : 'task', 'image-decode', `${app.spec.name}/${node.id}: crops for the next stages: ${describeError(err)}`, { source: frame.source, seq: frame.seq });
      return;
    }
    const bounds = { x1: offset.x, y1: offset.y, x2: offset.x + image.width, y2: offset.y + image.height };
    for (const child of planned.children) {
      let children = 0;
      for (const [i, detection] of output.detections.entries()) {
        if (!passesFilter(detection, child.edge.filter, frame)) continue;
        const region = cropRegion(detection.box, child.edge.cropPadding, bounds);
        if (region.x2 - region.x1 < 2 || region.y2 - region.y1 < 2) continue;
        children += 1;
        const crop = cropImage(whole, shiftBox(region, -offset.x, -offset.y));
        const task: Task = {
          app: app.spec.name,
          node: child.node.id,
          source: frame.source,
          frameSeq: frame.seq,
          captureTimeMs: frame.captureTimeMs,
          ...(frame.mediaTimeMs !== undefined ? { mediaTimeMs: frame.mediaTimeMs } : {}),
          deadlineMs: work.deadlineMs,
          budgetMs: Math.max(0, work.deadlineMs - Date.now()),
          region,
          frameWidth: frame.width,
          frameHeight: frame.height,
          lineage: [...work.lineage, outputId(work.inputId, node.id, i)],
          // On Kafka a JPEG (bandwidth); in process the pixels themselves.
          ...(options.bus.kind === 'memory' ? { pixels: { width: crop.width, height: crop.height }, jpeg: crop.data } : { jpeg: await encodeJpeg(crop) }),
        };
        post(out, Topics.tasks(child.node.model), { key: frame.source, value: taskContract.encode(task), headers: taskContract.headers });
      }
      stats.fannedOut(app.spec.name, node.id, child.node.id, children);
    }
  };

  /** An undecodable message: its bytes to the dead-letter topic, a drop for the drops table. */
  const undecodable = (out: Outbox, message: BusMessage, err: unknown): void => {
    post(out, Topics.dead, deadLetter(message, `backend:${options.id}`, describeError(err)));
    drop(out, 'message', 'decode', describeError(err), { source: message.key });
  };

  const handleFrame = async (message: BusMessage, out: Outbox, after: Promise<unknown>): Promise<void> => {
    let frame;
    try {
      frame = frameContract.decode(message.value);
    } catch (err) {
      return undecodable(out, message, err);
    }
    status.frames += 1;
    const at = { source: frame.source, seq: frame.seq };
    const apps = (frame.apps ?? options.appsForSource(frame.source)).filter((app) => roots.has(app));
    const planned = apps.flatMap((app) => roots.get(app) ?? []);
    if (planned.length === 0) return drop(out, 'frame', 'no-app', `no app analyzes source ${frame.source}`, at);
    for (const app of apps) stats.frame(app);
    // Decoded here when a crop will need the pixels; otherwise each model's pre-processing
    // decodes the JPEG straight to its input size (shrunk on load), and nothing else does.
    const crops = planned.some((p) => p.children.length > 0 || p.node.region);
    let image: ImageInput;
    try {
      image = crops ? await decodeJpeg(frame.jpeg) : await jpegImage(frame.jpeg);
    } catch (err) {
      return drop(out, 'frame', 'image-decode', describeError(err), at);
    }
    await Promise.all(
      planned.map((p) => {
        const local = frame.local?.find((l) => l.app === p.app.spec.name && l.node === p.node.id);
        return runNode({
          planned: p,
          frame,
          image,
          pixels: () => pixelsOf(image),
          offset: { x: 0, y: 0 },
          inputId: frameId(p.app.spec.name, frame.source, frame.seq),
          lineage: [],
          deadlineMs: frame.captureTimeMs + p.app.spec.sloMs,
          after,
          ...(local ? { localOutput: { kind: 'detections', detections: local.detections } } : {}),
        }, out);
      }),
    );
  };

  const handleTask = async (message: BusMessage, out: Outbox): Promise<void> => {
    let task: Task;
    try {
      task = taskContract.decode(message.value);
    } catch (err) {
      return undecodable(out, message, err);
    }
    status.tasks += 1;
    const at = { source: task.source, seq: task.frameSeq };
    const planned = nodes.get(`${task.app}/${task.node}`);
    if (!planned) return drop(out, 'task', 'unknown-node', `no node ${task.node} in app ${task.app} here`, at);
    let image: RgbImage;
    try {
      image = task.pixels ? rawImage(task.pixels, task.jpeg) : await decodeJpeg(task.jpeg);
    } catch (err) {
      return drop(out, 'task', 'image-decode', describeError(err), at);
    }
    const frame: FrameRef = {
      source: task.source,
      seq: task.frameSeq,
      captureTimeMs: task.captureTimeMs,
      ...(task.mediaTimeMs !== undefined ? { mediaTimeMs: task.mediaTimeMs } : {}),
      width: task.frameWidth ?? image.width,
      height: task.frameHeight ?? image.height,
    };
    const root = frameId(task.app, task.source, task.frameSeq);
    await runNode({
      planned,
      frame,
      image,
      pixels: () => Promise.resolve(image),
      offset: { x: task.region?.x1 ?? 0, y: task.region?.y1 ?? 0 },
      inputId: task.lineage.at(-1) ?? root,
      lineage: task.lineage,
      deadlineMs: task.deadlineMs,
    }, out);
  };

  const handle = async (batch: Batch): Promise<void> => {
    const out: Outbox = new Map();
    const handler = batch.topic === Topics.frames ? handleFrame : handleTask;
    // Frames decode and run together, but each makes its rows after the one before it in the
    // batch: trackers see a source's frames in order. A message that fails in a way nobody
    // foresaw becomes a drop: retrying it would fail again and hold up its partition forever.
    let previous: Promise<unknown> = Promise.resolve();
    await Promise.all(
      batch.messages.map((m) => {
        const handled = handler(m, out, previous).catch((err: unknown) => drop(out, 'message', 'internal-error', describeError(err), { source: m.key }));
        previous = handled;
        return handled;
      }),
    );
    for (const [topic, records] of out) await producer.send(topic, records);
    status.rows += out.get(Topics.results)?.length ?? 0;
  };

  /** The newest plan seen: sessions to host here and, through the group's assigner, partitions to consume. */
  let plan: Plan | undefined;
  /** The routing the consumer joined under; a plan that changes it makes the backend rejoin. */
  let joinedRouting = '';
  /** Weights to two decimals: an epoch's small shifts in rate do not move a partition, nor make every backend rejoin. */
  const routingOf = (p: Plan | undefined): string =>
    JSON.stringify(topics.map((topic) => Object.entries(planWeights(p)(topic) ?? {}).sort().map(([backend, w]) => [backend, w.toFixed(2)])));
  /**
   * Messages handled together: several model batches' worth, so that frames decode and prepare
   * while the batch before them runs (a partition's next messages come only once these are
   * done). One model batch per fetch ran CenterNet at batch 1 about 25% slower on one stream.
   */
  const messagesPerFetch = (): number => {
    const largestBatch = Math.max(1, ...[...nodes.values()].map((p) => batchOf(p.node.model)));
    return Math.max(MIN_MESSAGES_PER_FETCH, 4 * largestBatch);
  };
  const join = async (): Promise<void> => {
    joinedRouting = routingOf(plan);
    consumer = options.bus.consumer({
      groupId: options.groupId ?? 'panoptes.backend',
      topics,
      maxBatchSize: messagesPerFetch(),
      metadata: { backend: options.id },
      assigner: routingAssigner((topic) => planWeights(plan)(topic)),
    });
    await consumer.run(handle);
  };
  /**
   * A newer plan: its sessions are built first; if it routes partitions differently, the backend
   * leaves the group (finishing and committing the batch in hand) and joins again, so the group's
   * leader deals partitions by the new weights (kafkajs has no "rebalance now").
   */
  const follow = async (next: Plan): Promise<void> => {
    if (plan && next.createdAtMs <= plan.createdAtMs) return;
    plan = next;
    let rejoin = false;
    try {
      await hosting.follow(next, async () => {
        rejoin = status.state === 'running' && routingOf(next) !== joinedRouting;
        if (rejoin) await consumer?.close();
      });
    } finally {
      // Back in the group even when the plan could not be followed in full.
      if (rejoin && status.state === 'running') await join();
    }
    status.planEpoch = next.epoch;
  };
  let following = Promise.resolve();
  const onPlans = async (batch: Batch): Promise<void> => {
    // Only the newest plan counts: at start the backend reads every plan kept on the topic.
    let newest: Plan | undefined;
    for (const message of batch.messages) {
      try {
        const next = planContract.decode(message.value);
        if (!newest || next.createdAtMs > newest.createdAtMs) newest = next;
      } catch (err) {
        // The scheduler publishes a new plan every epoch; a bad one is said and skipped.
        logger.warn({ offset: message.offset, err: describeError(err) }, 'undecodable plan skipped');
      }
    }
    if (!newest) return;
    const next = newest;
    following = following.then(() => follow(next)).catch((err: unknown) => logger.error({ err, epoch: next.epoch }, 'plan not followed'));
    await following;
  };
  let planReader: Consumer | undefined;
  const device = options.device ?? { kind: 'cpu', name: cpus()[0]?.model ?? 'cpu', memoryMB: Math.round(totalmem() / 2 ** 20), host: hostname() };

  return {
    async start() {
      const models = options.apps.flatMap((app) => app.spec.nodes.map((n) => n.model));
      for (const app of options.apps) {
        for (const node of app.spec.nodes) {
          const children = app.spec.edges.filter((e) => e.from === node.id).map((edge) => ({ edge, node: app.spec.nodes.find((n) => n.id === edge.to)! }));
          let params: unknown;
          try {
            params = (await hosting.runner(node.model)).parseParams(node.params);
          } catch (err) {
            throw new PanoptesError(ErrorCode.AppInvalid, `app ${app.spec.name}, node ${node.id}: ${describeError(err)}`, { cause: err });
          }
          nodes.set(`${app.spec.name}/${node.id}`, { app, node, params, children });
        }
        roots.set(app.spec.name, app.spec.edges.filter((e) => e.from === 'frames').map((e) => nodes.get(`${app.spec.name}/${e.to}`)!));
      }
      await hosting.start(models);
      status.state = 'running';
      await join();
      // Its own group, new at each start: every backend reads every plan kept, and follows the newest.
      planReader = options.bus.consumer({ groupId: `${options.groupId ?? 'panoptes.backend'}.plan.${options.id}.${randomUUID()}`, topics: [Topics.plan] });
      await planReader.run(onPlans);
      statsTimer = setInterval(() => {
        publishStats();
        hosting.unloadIdle().catch((err: unknown) => logger.warn({ err }, 'model unload failed'));
      }, options.statsIntervalMs ?? 1000);
    },
    async drain() {
      status.state = 'draining';
      planReader?.pause([Topics.plan]);
      await following;
      consumer?.pause(topics);
      await executor.drain();
      // What the operators still hold (tracks in view at the end of a replay) is written now.
      const held = options.apps.flatMap((app) => app.flush());
      if (held.length > 0) {
        await producer.send(Topics.results, held.map((row) => ({ key: row.source, value: resultRowContract.encode(row), headers: resultRowContract.headers })));
        status.rows += held.length;
        for (const row of held) status.rowsByTable[row.table] = (status.rowsByTable[row.table] ?? 0) + 1;
      }
    },
    async close() {
      status.state = 'closed';
      clearInterval(statsTimer);
      statsFailures.close();
      await planReader?.close();
      await following;
      await consumer?.close();
      await producer.close();
      await hosting.close();
    },
    status: () => ({
      ...status,
      rowsByTable: { ...status.rowsByTable },
      dropsByReason: { ...status.dropsByReason },
      partitions: consumer?.assignment().length ?? 0,
      models: hosting.models(),
    }),
  };
}
