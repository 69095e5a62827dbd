import {
  Channels,
  describeError,
  redact,
  ErrorCode,
  PanoptesError,
  type Bus,
  type Frame,
  type Logger,
  type SourceConfig,
} from '../core/index.js';
import { describeShortfall, expectedFrames as framesIn } from './accounting.js';
import type { FileSource } from './file-source.js';
import type { LiveSource } from './live-source.js';
import { publishDamaged, publishMissedSegments, publishShortfall } from './owed-drops.js';
import { isDelayTolerant, isLive, openFrameSource } from './sources.js';

export interface IngestOptions {
  bus: Bus;
  /** Synthetic footage is rendered under `<dataDir>/footage`. */
  dataDir: string;
  logger: Logger;
  /** Frames published so far over all sources, and the expected total when every source has a known length. */
  onProgress?: (frames: number, total: number | undefined) => void;
  /** Collaborative processing: sees every frame before it is sent, and may analyze it here. */
  local?: LocalAnalysis;
}

/**
 * Collaborative processing (research/edge-scheduling.md §2.8): a frame analyzed by the ingest
 * worker itself, with a model of its own, when the backends are predicted to miss its deadline.
 */
export interface LocalAnalysis {
  /** The frame to send: with its `local` outputs when it was analyzed here, else as it came. */
  analyze(frame: Frame, source: SourceConfig): Promise<Frame>;
  /** Told of each frame sent: its JPEG's bytes, and how long the bus took to acknowledge it (the network's share of offloading). */
  sent(bytes: number, ms: number): void;
}

export interface SourceResult {
  id: string;
  frames: number;
  /**
   * A recording that ended early: the sampled frames it owed but never delivered, each
   * recorded as a `drops` row (what `frame`, stage `ingest`, reason `truncated`), and why.
   */
  missing?: { frames: number; detail: string };
  /** Why the source stopped early; the other sources keep running. */
  error?: string;
}

/** What a source has done so far. Frame counts are cumulative; latencies cover its last {@link LATENCY_WINDOW} frames. */
export interface SourceMetrics {
  id: string;
  kind: 'file' | 'live';
  state: string;
  origin: SourceOrigin;
  apps: readonly string[];
  /** Frames ffmpeg decoded, before sampling. */
  received: number;
  /** Frames the sampling policy kept. */
  sampled: number;
  /** Frames sent on the bus. */
  published: number;
  /** Of those, frames whose first model ran here (collaborative processing). */
  analyzedHere: number;
  /**
   * Frames never published: unreadable ones, and for a live source the frames of the time it
   * was down (`downtimeMs` × its frame rate, an estimate).
   */
  lost: number;
  /** Live sources: connections lost so far, and time without a stream. */
  reconnects?: number;
  downtimeMs?: number;
  /** HLS and Twitch: ad segments skipped, and segments lost before they could be fetched. */
  adSegmentsSkipped?: number;
  segmentsMissed?: number;
  /** A recording: the frames it will publish in all, and when it is expected to have (at the rate it has published so far, ISO 8601). */
  expectedFrames?: number;
  expectedFinishAt?: string;
  /** From capture (a live frame's arrival, a replayed frame's due time) to the bus's acknowledgement, ms. */
  latencyP50Ms: number | undefined;
  latencyP99Ms: number | undefined;
  error?: string;
}

export const LATENCY_WINDOW = 1000;

/**
 * The ingest worker: runs sources, each until it ends or is removed, and publishes their
 * frames on `panoptes.frames`, keyed by source id. A source that fails is logged and reported;
 * it never stops the others. Sources are added and removed while the others run.
 */
export interface Ingest {
  /** Starts a source. @throws PanoptesError ConfigInvalid when a source with its id runs */
  add(config: SourceConfig, origin?: SourceOrigin): void;
  /** Stops a source; what it read is still published. @throws PanoptesError SourceNotFound */
  remove(id: string): Promise<SourceResult>;
  /**
   * Makes the running sources from the deployment file match `configs` (the file read again):
   * starts new ids, stops missing ones, restarts changed ones; the others keep running untouched,
   * and so do sources added through the API, unless the file now names their id.
   */
  reconcile(configs: readonly SourceConfig[]): Promise<{ added: string[]; removed: string[]; restarted: string[] }>;
  /** The running sources, then the ended ones. */
  metrics(): SourceMetrics[];
  /** Resolves when no source is running (at once when none is). */
  idle(): Promise<void>;
  /** Stops every source, publishes what they read, closes the producer. Returns every source's result. */
  close(): Promise<SourceResult[]>;
}

/** Where a source came from: the deployment file (a reload manages it) or the HTTP API. */
export type SourceOrigin = 'file' | 'api';

interface Running {
  config: SourceConfig;
  origin: SourceOrigin;
  source: Source | undefined;
  published: number;
  /** When the first frame was published, ms. */
  firstPublishedMs?: number;
  analyzedHere: number;
  latencies: number[];
  stopped: boolean;
  result: Promise<SourceResult>;
  outcome?: SourceResult;
}

type Source = FileSource | LiveSource;

export function createIngest(options: IngestOptions): Ingest {
  const { bus, logger } = options;
  const producer = bus.producer();
  const running = new Map<string, Running>();
  const ended = new Map<string, Running>();
  /** The outcomes of ended sources past MAX_ENDED_SOURCES, for the run's summary (a few dozen bytes each). */
  const letGo = new Map<string, SourceResult>();
  let idleWaiters: (() => void)[] = [];
  let closed = false;

  const report = (): void => {
    if (!options.onProgress) return;
    let frames = 0;
    let total: number | undefined = 0;
    for (const entry of [...running.values(), ...ended.values()]) {
      frames += entry.published;
      const expected = expectedFrames(entry);
      total = total === undefined || expected === undefined ? undefined : total + expected;
    }
    options.onProgress(frames, total);
  };

  const run = async (entry: Running): Promise<SourceResult> => {
    const { config } = entry;
    const sourceLogger = logger.child({ module: 'ingest', source: config.id });
    try {
      const source = await openFrameSource(config, options.dataDir, sourceLogger);
      entry.source = source;
      if (entry.stopped) await source.stop();
      // A replay faster than real time goes apart from live frames (Topics.backfillFrames).
      const channel = isDelayTolerant(config) ? Channels.backfillFrames : Channels.frames;
      /** Samples of a recording that cannot be analyzed, as drops, before the frames after them. */
      let damagedSaid = 0;
      const sayDamaged = async (): Promise<void> => {
        const owed = 'takeDamaged' in source ? source.takeDamaged() : [];
        damagedSaid += owed.length;
        if (owed.length > 0) await publishDamaged(producer, config.id, owed);
      };
      /** Live segments lost before they were read (HLS, Twitch), as drops: the frames they held never came. */
      let missedSaid = 0;
      const sayMissed = async (nearSeq?: number): Promise<void> => {
        const status = source.status();
        const missed = 'segmentsMissed' in status ? (status.segmentsMissed ?? 0) : 0;
        if (missed <= missedSaid) return;
        await publishMissedSegments(producer, config.id, missed - missedSaid, nearSeq);
        missedSaid = missed;
      };
      for await (const read of source.frames()) {
        await sayDamaged();
        await sayMissed(read.seq);
        // A replay faster than real time has no deadline to offload for.
        const frame = options.local && channel === Channels.frames ? await options.local.analyze(read, config) : read;
        // The apps travel with each frame, so a backend elsewhere knows a source added while running.
        const sending = performance.now();
        await producer.send(channel.topic, [channel.record({ ...frame, apps: config.apps })]);
        options.local?.sent(frame.jpeg.byteLength, performance.now() - sending);
        entry.published += 1;
        entry.firstPublishedMs ??= Date.now();
        if (frame.local) entry.analyzedHere += 1;
        entry.latencies.push(Date.now() - frame.captureTimeMs);
        if (entry.latencies.length > LATENCY_WINDOW) entry.latencies.shift();
        report();
      }
      await sayDamaged();
      await sayMissed();
      const ended = source.status();
      const shortfall = 'shortfall' in ended && !entry.stopped ? ended.shortfall : undefined;
      if (shortfall) await publishShortfall(producer, config.id, shortfall);
      const missing = [
        ...(damagedSaid > 0 ? [{ frames: damagedSaid, detail: `${damagedSaid} samples of footage ffmpeg could not decode` }] : []),
        ...(shortfall ? [{ frames: shortfall.missing, detail: describeShortfall(shortfall) }] : []),
      ];
      if (missing.length === 0) return { id: config.id, frames: entry.published };
      return { id: config.id, frames: entry.published, missing: { frames: missing.reduce((n, m) => n + m.frames, 0), detail: missing.map((m) => m.detail).join('; ') } };
    } catch (err) {
      if (closed || entry.stopped) {
        // Stopped while a frame waited on the bus (a broker away past the stop's grace): a stop, not a failure.
        sourceLogger.warn(`stopped after ${entry.published} frames; the next one was not sent: ${describeError(err).split('\n')[0]}`);
        return { id: config.id, frames: entry.published };
      }
      // One line for operators; the whole error (ffmpeg's stderr, stack) at debug level.
      sourceLogger.error({ code: (err as { code?: string }).code }, `source failed: ${describeError(err).split('\n')[0]}`);
      sourceLogger.debug({ err }, 'source failure details');
      // Kept redacted: the error is served (GET /sources, the dashboard) and printed in summaries.
      return { id: config.id, frames: entry.published, error: redact(describeError(err)) };
    }
  };

  const add = (config: SourceConfig, origin: SourceOrigin = 'api'): void => {
    if (closed) throw new PanoptesError(ErrorCode.Closed, `source ${config.id}: the ingest worker is closed`);
    if (running.has(config.id)) throw new PanoptesError(ErrorCode.ConfigInvalid, `source ${config.id} is already running; remove it first or give another id`);
    // An id that ran before in this process: the summary counts both runs' frames under it.
    const before = ended.get(config.id)?.outcome ?? letGo.get(config.id);
    ended.delete(config.id);
    letGo.delete(config.id);
    const entry: Running = { config, origin, source: undefined, published: 0, analyzedHere: 0, latencies: [], stopped: false, result: Promise.resolve({ id: config.id, frames: 0 }) };
    running.set(config.id, entry);
    entry.result = run(entry).then((latest) => {
      const result = before ? followOn(before, latest) : latest;
      entry.outcome = result;
      if (running.get(config.id) === entry) {
        running.delete(config.id);
        ended.set(config.id, entry);
        // A long-lived worker sees sources come and go: the oldest ended ones are let go, but for their outcome.
        for (const [oldest, { outcome }] of ended) {
          if (ended.size <= MAX_ENDED_SOURCES) break;
          ended.delete(oldest);
          letGo.set(oldest, outcome!);
        }
      }
      if (running.size === 0) {
        for (const wake of idleWaiters) wake();
        idleWaiters = [];
      }
      return result;
    });
    logger.info({ source: config.id, apps: config.apps }, 'source added');
  };

  const stop = async (entry: Running): Promise<SourceResult> => {
    entry.stopped = true;
    await entry.source?.stop();
    return entry.result;
  };

  const remove = async (id: string): Promise<SourceResult> => {
    const entry = running.get(id);
    if (!entry) throw new PanoptesError(ErrorCode.SourceNotFound, `no running source "${id}"; running: ${[...running.keys()].join(', ') || 'none'}`);
    const result = await stop(entry);
    logger.info({ source: id, frames: result.frames }, 'source removed');
    return result;
  };

  return {
    add,
    remove,
    async reconcile(configs) {
      const wanted = new Map(configs.map((c) => [c.id, c]));
      const removed = [...running.values()].filter((e) => e.origin === 'file' && !wanted.has(e.config.id)).map((e) => e.config.id);
      const restarted = [...running.values()].filter((e) => wanted.has(e.config.id) && !sameConfig(e.config, wanted.get(e.config.id)!)).map((e) => e.config.id);
      // A replay that played through stays ended unless the file changed it; a failed or removed source starts again.
      const playedThrough = (c: SourceConfig): boolean => {
        const entry = ended.get(c.id);
        return entry !== undefined && !entry.stopped && entry.outcome?.error === undefined && sameConfig(entry.config, c);
      };
      const added = configs.filter((c) => !running.has(c.id) && !playedThrough(c)).map((c) => c.id);
      // The file now names a source the API added, unchanged: the file manages it from now on.
      for (const entry of running.values()) if (wanted.has(entry.config.id)) entry.origin = 'file';
      await Promise.all([...removed, ...restarted].map(remove));
      for (const id of [...restarted, ...added]) add(wanted.get(id)!, 'file');
      return { added, removed, restarted };
    },
    metrics: () => [...running.values(), ...ended.values()].map(metricsOf),
    idle: () => (running.size === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve))),
    async close() {
      closed = true;
      try {
        await Promise.all([...running.values()].map(stop));
      } finally {
        await producer.close();
      }
      return [...letGo.values(), ...[...ended.values()].map((e) => e.outcome!)];
    },
  };
}

/** One id's outcome over two runs: the frames of both, what either owed, the latest run's error. */
function followOn(before: SourceResult, latest: SourceResult): SourceResult {
  const owed = [before.missing, latest.missing].filter((m) => m !== undefined);
  return {
    id: latest.id,
    frames: before.frames + latest.frames,
    ...(owed.length > 0 ? { missing: { frames: owed.reduce((n, m) => n + m.frames, 0), detail: owed.map((m) => m.detail).join('; ') } } : {}),
    ...(latest.error !== undefined ? { error: latest.error } : {}),
  };
}

/**
 * Ended or removed sources whose figures are kept (GET /sources, metrics): the most recent ones,
 * so a worker that sees sources come and go for weeks stays bounded. The run's summary has every outcome.
 */
export const MAX_ENDED_SOURCES = 1024;

/** Runs every source until it ends (or `signal` stops them all) and returns their results. */
export async function runIngest(options: IngestOptions & { sources: readonly SourceConfig[]; signal?: AbortSignal }): Promise<SourceResult[]> {
  const ingest = createIngest(options);
  const stop = (): void => void ingest.close();
  options.signal?.addEventListener('abort', stop, { once: true });
  try {
    for (const config of options.sources) ingest.add(config, 'file');
    await ingest.idle();
  } finally {
    options.signal?.removeEventListener('abort', stop);
  }
  return ingest.close();
}

function metricsOf(entry: Running): SourceMetrics {
  const status = entry.source?.status();
  const live = status && 'downtimeMs' in status ? status : undefined;
  const downtimeLost = live?.nativeFps ? Math.round((live.downtimeMs / 1000) * live.nativeFps) : 0;
  const sorted = [...entry.latencies].sort((a, b) => a - b);
  const quantile = (q: number): number | undefined => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : undefined);
  return {
    id: entry.config.id,
    kind: isLive(entry.config) ? 'live' : 'file',
    state: entry.outcome ? (entry.outcome.error ? 'failed' : entry.stopped ? 'removed' : 'ended') : (status?.state ?? 'starting'),
    origin: entry.origin,
    apps: entry.config.apps,
    received: status?.framesDecoded ?? 0,
    sampled: status?.framesEmitted ?? 0,
    published: entry.published,
    analyzedHere: entry.analyzedHere,
    lost: (status?.framesSkipped ?? 0) + downtimeLost,
    ...(live ? { reconnects: live.reconnects, downtimeMs: Math.round(live.downtimeMs) } : {}),
    ...(live?.adSegmentsSkipped !== undefined ? { adSegmentsSkipped: live.adSegmentsSkipped, segmentsMissed: live.segmentsMissed } : {}),
    ...expectedFinish(entry),
    latencyP50Ms: quantile(0.5),
    latencyP99Ms: quantile(0.99),
    ...(entry.outcome?.error ? { error: entry.outcome.error } : {}),
  };
}

/** A recording's total, and while it runs, when it should end at the rate it has kept since its first frame. */
function expectedFinish(entry: Running): Pick<SourceMetrics, 'expectedFrames' | 'expectedFinishAt'> {
  const total = expectedFrames(entry);
  if (total === undefined) return {};
  const now = Date.now();
  const sinceFirstMs = entry.firstPublishedMs === undefined ? 0 : now - entry.firstPublishedMs;
  // A rate over less than a second (or a single frame) says little.
  if (entry.outcome || entry.published < 2 || sinceFirstMs < 1000) return { expectedFrames: total };
  const leftMs = (Math.max(0, total - entry.published) * sinceFirstMs) / (entry.published - 1);
  return { expectedFrames: total, expectedFinishAt: new Date(now + leftMs).toISOString() };
}

/**
 * How many frames a source will publish in all, when that can be known ahead: the file
 * source's count (its duration and sampling, after any cap of `fps`). A live stream has no length.
 */
function expectedFrames(entry: Running): number | undefined {
  const status = entry.source?.status();
  if (status) return 'expectedFrames' in status ? status.expectedFrames : undefined;
  // Not started yet (synthetic footage still rendering): its length and rate are in its config.
  const { synthetic, fps, loop } = entry.config;
  return synthetic && fps !== undefined && !loop ? framesIn(synthetic.durationS * 1000, undefined, { fps }) : undefined;
}

const sameConfig = (a: SourceConfig, b: SourceConfig): boolean => JSON.stringify(a) === JSON.stringify(b);
