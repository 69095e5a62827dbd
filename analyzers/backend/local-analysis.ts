/**
 * Collaborative processing (research/edge-scheduling.md §2.8, binary offloading): an ingest
 * worker runs an app's first model itself, with a model of its own (usually a cheaper one), when
 * the backends are predicted to miss the frame's deadline, and sends the frame with that model's
 * detections; the backend then skips the node and goes on from its output.
 *
 * Per frame, the paper's estimates, each an EWMA with weight 0.3 on the new sample:
 * - T_net: the frame's bytes over the send throughput, measured on this worker's own sends as
 *   the bus acknowledged them (`sent`);
 * - T_srv: the time the backends report a request of the replaced model takes (their P99 of an
 *   interval, over the reports of the last `holdMs`). A report whose share of dropped or late
 *   requests is over `maxBadRate` says the backends miss deadlines now: T_srv counts as
 *   unbounded while it holds (`congested`);
 * - T_loc: local runs, times the runs already waiting here plus one (the local queue); with no
 *   run yet, the first one measures it.
 * The frame goes to the backends while T_net + T_srv fits what is left of its deadline, and is
 * analyzed here otherwise, if that is faster. (The paper's client runs locally whenever T_loc
 * fits; here the backends come first, because the local model is usually the cheaper one.)
 * A local run that fails leaves the frame to the backends, as if it had not been tried.
 */
import { randomUUID } from 'node:crypto';
import {
  Channels,
  describeError,
  Topics,
  type AppSpec,
  type Bus,
  type Consumer,
  type Frame,
  type Logger,
  type ResolvedModel,
  type SourceConfig,
} from '../../core/index.js';
import { jpegImage } from '../image/index.js';
import { loadModelRunner, type ModelRunner } from '../models/index.js';
import type { ModelRuntime } from '../runtime/index.js';

export interface LocalAnalysisOptions {
  bus: Bus;
  runtime: ModelRuntime;
  models: Readonly<Record<string, ResolvedModel>>;
  apps: readonly AppSpec[];
  /** The model run here, from the zoo. */
  model: string;
  /** The model of the apps' first nodes it stands in for; its sessions' bad rate tells congestion. */
  replaces: string;
  /** Backends are congested while a session of `replaces` reports a larger share of dropped or late requests. */
  maxBadRate: number;
  /** How long a backend's report counts: its congestion, and its time in T_srv. */
  holdMs: number;
  logger: Logger;
}

export interface LocalAnalysisStatus {
  /** A backend reported a bad rate over `maxBadRate` within `holdMs`. */
  congested: boolean;
  /** Frames analyzed here so far. */
  analyzed: number;
  /** T_loc for one run, ms; undefined before the first. */
  localMs: number | undefined;
  /** T_srv, ms; undefined without a report within `holdMs`. */
  serverMs: number | undefined;
  /** The send throughput behind T_net, bytes per ms; undefined before the first send. */
  sendBytesPerMs: number | undefined;
}

/** The weight of the newest sample in every estimate: the paper's, for its throughput estimate. */
export const EWMA_WEIGHT = 0.3;

const ewma = (previous: number | undefined, sample: number): number => (previous === undefined ? sample : EWMA_WEIGHT * sample + (1 - EWMA_WEIGHT) * previous);

export function createLocalAnalysis(options: LocalAnalysisOptions) {
  const { bus, logger: parent, replaces } = options;
  const logger = parent.child({ module: 'ingest.local-analysis', model: options.model });
  const spec = options.models[options.model];
  if (!spec) throw new Error(`local analysis: model "${options.model}" is not in the zoo`);
  let runner: Promise<ModelRunner> | undefined;
  let congestedUntilMs = 0;
  let localMs: number | undefined;
  let serverMs: number | undefined;
  let serverHeardMs = 0;
  let sendBytesPerMs: number | undefined;
  let waitingHere = 0;
  let wasLocal = false;
  let analyzed = 0;
  let consumer: Consumer | undefined;

  type FirstNode = { app: AppSpec; node: AppSpec['nodes'][number]; params: unknown };
  const firstNodesByApps = new Map<string, FirstNode[]>();

  /** The apps among `apps` whose first nodes run `replaces`: what a frame's deadline is judged by. */
  const replacing = (apps: readonly string[]): { app: AppSpec; node: AppSpec['nodes'][number] }[] =>
    options.apps
      .filter((app) => apps.includes(app.name))
      .flatMap((app) =>
        app.edges
          .filter((e) => e.from === 'frames')
          .map((e) => ({ app, node: app.nodes.find((n) => n.id === e.to)! }))
          .filter(({ node }) => node.model === replaces),
      );

  /** Those first nodes with their params checked for the local model, which loads on first need; worked out once per set of apps. */
  const firstNodes = async (apps: readonly string[]): Promise<FirstNode[]> => {
    const model = await (runner ??= loadModelRunner(spec, options.runtime, logger));
    const key = apps.join(',');
    const known = firstNodesByApps.get(key);
    if (known) return known;
    const nodes = replacing(apps).map(({ app, node }) => ({ app, node, params: model.parseParams(node.params) }));
    firstNodesByApps.set(key, nodes);
    return nodes;
  };

  /** Whether this frame is better analyzed here: the backends predicted late, and this worker faster. */
  const betterHere = (frame: Frame, leftMs: number): boolean => {
    const now = Date.now();
    const serverKnown = now < serverHeardMs + options.holdMs;
    const remoteMs = now < congestedUntilMs ? Infinity : (sendBytesPerMs ? frame.jpeg.byteLength / sendBytesPerMs : 0) + (serverKnown ? serverMs! : 0);
    const here = remoteMs > leftMs && (localMs === undefined || localMs * (waitingHere + 1) < remoteMs);
    if (here !== wasLocal) logger.warn({ replaces, remoteMs, localMs, leftMs }, here ? 'backends predicted late: analyzing frames here' : 'backends predicted on time: sending frames only');
    wasLocal = here;
    return here;
  };

  return {
    async start(): Promise<void> {
      // A group of its own: every ingest worker hears every backend.
      consumer = bus.consumer({ groupId: `panoptes.ingest.local.${randomUUID()}`, topics: [Topics.stats] });
      await consumer.run(async (batch) => {
        for (const message of batch.messages) {
          let stats;
          try {
            stats = Channels.stats.decode(message.value);
          } catch {
            continue; // the backend that wrote it logs its own; congestion is read from the others
          }
          for (const session of stats.sessions.filter((s) => s.session === replaces || s.session.startsWith(`${replaces}@`))) {
            // From when the interval ended, as read by this clock: a stats message stamped ahead (clock skew, or forged) holds no longer than a fresh one.
            if (session.badRate > options.maxBadRate) congestedUntilMs = Math.max(congestedUntilMs, Math.min(stats.toMs, Date.now()) + options.holdMs);
            if (session.latencyP99Ms > 0) [serverMs, serverHeardMs] = [ewma(serverMs, session.latencyP99Ms), Date.now()];
          }
        }
      });
    },

    async analyze(frame: Frame, source: SourceConfig): Promise<Frame> {
      try {
        // Judged before the local model is needed: while the backends keep up it is never loaded.
        const apps = replacing(source.apps);
        if (apps.length === 0) return frame;
        const leftMs = Math.min(...apps.map(({ app }) => frame.captureTimeMs + app.sloMs)) - Date.now();
        if (!betterHere(frame, leftMs)) return frame;
        const nodes = await firstNodes(source.apps);
        const model = await runner!;
        waitingHere += 1;
        const started = Date.now();
        let outputs;
        try {
          const image = await jpegImage(frame.jpeg); // decoded by the model's pre-processing, at its size
          outputs = await model.run(nodes.map(() => image), nodes.map((n) => n.params));
        } finally {
          waitingHere -= 1;
        }
        localMs = ewma(localMs, Date.now() - started);
        analyzed += 1;
        return {
          ...frame,
          local: nodes.map(({ app, node }, i) => {
            const output = outputs[i]!;
            return { app: app.name, node: node.id, model: options.model, detections: output.kind === 'detections' ? output.detections : [] };
          }),
        };
      } catch (err) {
        logger.warn({ source: frame.source, seq: frame.seq, reason: describeError(err) }, 'local analysis failed; the backends analyze the frame');
        return frame;
      }
    },

    /** Told of each frame this worker sent, and how long the bus took to take it: the throughput behind T_net. */
    sent(bytes: number, ms: number): void {
      sendBytesPerMs = ewma(sendBytesPerMs, bytes / Math.max(ms, 0.01));
    },

    status: (): LocalAnalysisStatus => ({
      congested: Date.now() < congestedUntilMs,
      analyzed,
      localMs,
      serverMs: Date.now() < serverHeardMs + options.holdMs ? serverMs : undefined,
      sendBytesPerMs,
    }),

    async close(): Promise<void> {
      await consumer?.close();
      await (await runner?.catch(() => undefined))?.dispose();
    },
  };
}

export type LocalAnalysis = ReturnType<typeof createLocalAnalysis>;
