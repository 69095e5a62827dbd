/**
 * Collaborative processing (research/edge-scheduling.md §2.8, binary offloading): while the
 * backends report congestion, an ingest worker runs an app's first model itself, with a model
 * of its own (usually a cheaper one), and sends the frame with that model's detections; the
 * backend then skips the node and goes on from its output.
 *
 * The policy, kept simple:
 * - Congested: some backend's last stats (within `holdMs`) show a session of the model this
 *   one replaces with a bad rate (dropped or late) over `maxBadRate`.
 * - Then a frame is analyzed here only when the local time estimate fits what is left of its
 *   deadline, as the paper's client runs locally only when `T_loc ≤ deadline`. The estimate is
 *   an EWMA of measured local runs with weight 0.3 on the new sample (the paper's weight for
 *   its throughput estimate); with no run yet, the first one measures it.
 * - A local run that fails leaves the frame to the backends, as if it had not been tried.
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
  /** How long a report of congestion counts. */
  holdMs: number;
  logger: Logger;
}

export interface LocalAnalysisStatus {
  congested: boolean;
  /** Frames analyzed here so far. */
  analyzed: number;
  /** EWMA of a local run, ms; undefined before the first. */
  estimateMs: number | undefined;
}

/** The weight of the newest sample in the local time estimate. */
export const EWMA_WEIGHT = 0.3;

export function createLocalAnalysis(options: LocalAnalysisOptions) {
  const { bus, logger: parent, replaces } = options;
  const logger = parent.child({ module: 'ingest.local-analysis', model: options.model });
  const spec = options.models[options.model];
  if (!spec) throw new Error(`local analysis: model "${options.model}" is not in the zoo`);
  let runner: Promise<ModelRunner> | undefined;
  let congestedUntilMs = 0;
  let wasCongested = false;
  let estimateMs: number | undefined;
  let analyzed = 0;
  let consumer: Consumer | undefined;

  type FirstNode = { app: AppSpec; node: AppSpec['nodes'][number]; params: unknown };
  const firstNodesByApps = new Map<string, FirstNode[]>();

  /** The first nodes of these apps that run `replaces`, with their params checked for the local model; worked out once per set of apps. */
  const firstNodes = async (apps: readonly string[]): Promise<FirstNode[]> => {
    const model = await (runner ??= loadModelRunner(spec, options.runtime));
    const key = apps.join(',');
    const known = firstNodesByApps.get(key);
    if (known) return known;
    const nodes = options.apps
      .filter((app) => apps.includes(app.name))
      .flatMap((app) =>
        app.edges
          .filter((e) => e.from === 'frames')
          .map((e) => app.nodes.find((n) => n.id === e.to)!)
          .filter((node) => node.model === replaces)
          .map((node) => ({ app, node, params: model.parseParams(node.params) })),
      );
    firstNodesByApps.set(key, nodes);
    return nodes;
  };

  const congested = (): boolean => {
    const now = Date.now();
    const is = now < congestedUntilMs;
    if (is !== wasCongested) logger.warn({ replaces }, is ? 'backends congested: analyzing frames here' : 'backends keep up again: sending frames only');
    wasCongested = is;
    return is;
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
          const overloaded = stats.sessions.some((s) => (s.session === replaces || s.session.startsWith(`${replaces}@`)) && s.badRate > options.maxBadRate);
          if (overloaded) congestedUntilMs = Math.max(congestedUntilMs, stats.toMs + options.holdMs);
        }
      });
    },

    async analyze(frame: Frame, source: SourceConfig): Promise<Frame> {
      if (!congested()) return frame;
      try {
        const nodes = await firstNodes(source.apps);
        if (nodes.length === 0) return frame;
        const leftMs = Math.min(...nodes.map(({ app }) => frame.captureTimeMs + app.sloMs)) - Date.now();
        if (estimateMs !== undefined && estimateMs > leftMs) return frame;
        const model = await runner!;
        const started = Date.now();
        const image = await jpegImage(frame.jpeg); // decoded by the model's pre-processing, at its size
        const outputs = await model.run(nodes.map(() => image), nodes.map((n) => n.params));
        const tookMs = Date.now() - started;
        estimateMs = estimateMs === undefined ? tookMs : EWMA_WEIGHT * tookMs + (1 - EWMA_WEIGHT) * estimateMs;
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

    status: (): LocalAnalysisStatus => ({ congested: Date.now() < congestedUntilMs, analyzed, estimateMs }),

    async close(): Promise<void> {
      await consumer?.close();
      await (await runner?.catch(() => undefined))?.dispose();
    },
  };
}

export type LocalAnalysis = ReturnType<typeof createLocalAnalysis>;
