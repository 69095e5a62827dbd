/**
 * A live source (a camera or stream URL): the file source's ffmpeg pipeline, kept alive. When
 * the stream ends, fails or stalls (no frame for `stallMs`), ffmpeg is stopped and started again
 * after an exponential backoff with jitter; the first frame of a connection resets the backoff.
 * Frames are stamped with the wall clock when they are read (a camera's pts is not a time of
 * day) and numbered on across reconnects.
 *
 * Each connection reads `url`, or what `connect` gives (Twitch resolves its channel there, so an
 * expired token is renewed by the next connection). A `SourceOffline` error from `connect` is a
 * state, not a failure: the source waits `offlineRetryMs` and looks again, logging once.
 */
import type { Readable } from 'node:stream';
import {
  describeError,
  redact,
  ErrorCode,
  PanoptesError,
  silentLogger,
  systemClock,
  type Clock,
  type Frame,
  type Logger,
  type SamplePolicy,
} from '../core/index.js';
import { webInputOptions } from './ffmpeg.js';
import { createFileSource, type FileSource } from './file-source.js';
import type { FrameCounts, FrameSource } from './frame-source.js';
import type { HlsStats } from './hls.js';

export interface Backoff {
  initialMs: number;
  maxMs: number;
  /** Each wait is scaled by a uniform factor in [1 - jitter, 1 + jitter], so cameras lost together do not retry together. */
  jitter: number;
}

export const DEFAULT_BACKOFF: Backoff = { initialMs: 500, maxMs: 30_000, jitter: 0.2 };

export interface LiveSourceOptions {
  id: string;
  /** Anything ffmpeg reads live: rtsp://, rtmp://, http(s):// (MJPEG, MPEG-TS, HLS), udp://, srt://, /dev/video0. */
  url: string;
  fps?: number;
  sample?: SamplePolicy;
  width?: number;
  quality?: number;
  /**
   * Wait for the camera to push its stream here (RTSP `-rtsp_flags listen`, RTMP `-listen 1`)
   * instead of pulling it; no frame counts as a stall before the first of a connection.
   */
  listen?: boolean;
  /** RTSP over TCP (the default: UDP loses packets on busy links) or UDP, for cameras that only speak UDP. */
  rtspTransport?: 'tcp' | 'udp';
  /**
   * What each connection reads: a URL for ffmpeg, or a byte stream piped into it (an HLS
   * follower's, whose `'ad-skipped'` events count as progress: an ad break is not a stall).
   * @defaultValue `url`
   */
  connect?: (signal: AbortSignal) => Promise<string | Readable>;
  /** Counters of what `connect` streams (HLS: ad segments skipped, segments missed), over all connections. */
  inputStats?: () => Pick<HlsStats, 'adSegmentsSkipped' | 'segmentsMissed'>;
  /** No frame for this long counts as a lost stream. @defaultValue 10000 */
  stallMs?: number;
  /** How long an offline channel waits before it looks again. @defaultValue 60000 */
  offlineRetryMs?: number;
  backoff?: Backoff;
  logger?: Logger;
  ffmpegPath?: string;
  clock?: Clock;
  /** @defaultValue Math.random */
  random?: () => number;
}

/** Frame counts are over all connections. */
export interface LiveSourceStatus extends FrameCounts {
  state: 'idle' | 'connecting' | 'streaming' | 'waiting' | 'offline' | 'stopped';
  /** Time since the first connection without a stream (lost, waiting, reconnecting or offline). */
  downtimeMs: number;
  /** HLS and Twitch: ad segments skipped, and segments lost before they could be fetched. */
  adSegmentsSkipped?: number;
  segmentsMissed?: number;
  /** Connections lost so far (ended, failed or stalled). */
  reconnects: number;
  lastFrameAtMs: number | undefined;
  /** Why the last connection was lost. */
  lastError: string | undefined;
}

/** A live input: its frames never end or throw on their own, only after `stop()`. */
export type LiveSource = FrameSource<LiveSourceStatus>;

/** The wait before reconnect attempt `attempt` (0 = the first after a loss). */
export function backoffMs(attempt: number, backoff: Backoff, random: () => number): number {
  const base = Math.min(backoff.maxMs, backoff.initialMs * 2 ** attempt);
  return base * (1 - backoff.jitter + 2 * backoff.jitter * random());
}

class Stalled extends Error {
  constructor(ms: number) {
    super(`no frame for ${ms} ms`);
  }
}

/**
 * Low-latency input: no input buffering, a probe of at most one second of stream (ffmpeg's
 * default five would delay the first frame), and RTSP over TCP unless told otherwise.
 */
function lowLatencyInput(url: string | undefined, listen: boolean, rtspTransport: 'tcp' | 'udp'): string[] {
  const rtsp = /^rtsps?:/i.test(url ?? '');
  return [
    // A piped stream comes in whole segments: dropping what the probe read would lose seconds.
    ...(url === undefined ? [] : ['-fflags', 'nobuffer']),
    '-flags', 'low_delay', '-analyzeduration', '1000000', '-probesize', '1000000',
    // A timestamp jump over 1 s (an HLS discontinuity, a skipped ad, lost segments) is smoothed
    // over; otherwise the fps filter would fill the gap with copies of the last frame.
    '-dts_delta_threshold', '1',
    ...(rtsp ? ['-rtsp_transport', rtspTransport] : []),
    ...webInputOptions(url),
    ...(/^\/dev\/video/.test(url ?? '') ? ['-f', 'v4l2'] : []),
    ...(listen ? (rtsp ? ['-rtsp_flags', 'listen'] : ['-listen', '1']) : []),
  ];
}

export function createLiveSource(options: LiveSourceOptions): LiveSource {
  const { id, url } = options;
  const clock = options.clock ?? systemClock;
  const random = options.random ?? Math.random;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  const stallMs = options.stallMs ?? 10_000;
  const offlineRetryMs = options.offlineRetryMs ?? 60_000;
  const listen = options.listen ?? false;
  const logger = (options.logger ?? silentLogger()).child({ module: 'ingest.live-source', source: id });
  const abort = new AbortController();
  const status: LiveSourceStatus = {
    state: 'idle', framesEmitted: 0, framesDecoded: 0, framesSkipped: 0, downtimeMs: 0, nativeFps: undefined,
    reconnects: 0, lastFrameAtMs: undefined, lastError: undefined,
  };
  /** Counts of the connections before the current one. */
  const closed = { framesDecoded: 0, framesSkipped: 0 };
  /** When the stream was last lost (or first asked for), while it is down. */
  let downSinceMs: number | undefined;
  let current: FileSource | undefined;
  let iterated = false;

  /** When the input last showed progress other than a frame (an ad segment skipped). */
  let progressAtMs = 0;

  /** The next frame of this connection, or a Stalled error when neither it nor other progress comes in time. */
  const nextWithin = async (frames: AsyncIterator<Frame>, waitForever: boolean): Promise<IteratorResult<Frame>> => {
    const next = frames.next();
    if (waitForever) return next;
    next.catch(() => undefined); // settled by stop() after a stall; nobody waits for it then
    const waitedFrom = clock.now();
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const quietFor = clock.now() - Math.max(waitedFrom, progressAtMs);
      const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), Math.max(0, stallMs - quietFor))));
      try {
        const result = await Promise.race([next, timeout]);
        if (result !== 'timeout') return result;
      } finally {
        clearTimeout(timer);
      }
      if (clock.now() - Math.max(waitedFrom, progressAtMs) >= stallMs) throw new Stalled(stallMs);
    }
  };

  /** One connection's frames, until it ends, fails or stalls. */
  async function* connection(): AsyncGenerator<Frame> {
    const input = options.connect ? await options.connect(abort.signal) : url;
    const [path, stream] = typeof input === 'string' ? [input, undefined] : [undefined, input];
    stream?.on('ad-skipped', () => (progressAtMs = clock.now()));
    if (abort.signal.aborted) {
      stream?.destroy();
      return;
    }
    current = createFileSource({
      id,
      path: path ?? url,
      ...(stream ? { input: stream } : {}),
      speed: 'max',
      loop: false,
      live: true,
      inputOptions: lowLatencyInput(path, listen, options.rtspTransport ?? 'tcp'),
      logger,
      ...(options.fps !== undefined ? { fps: options.fps } : {}),
      ...(options.sample ? { sample: options.sample } : {}),
      ...(options.width !== undefined ? { width: options.width } : {}),
      ...(options.quality !== undefined ? { quality: options.quality } : {}),
      ...(options.ffmpegPath ? { ffmpegPath: options.ffmpegPath } : {}),
    });
    const frames = current.frames()[Symbol.asyncIterator]();
    try {
      for (let next = await nextWithin(frames, listen); !next.done; next = await nextWithin(frames, false)) {
        onStreaming();
        yield next.value;
      }
    } finally {
      await current.stop();
      stream?.destroy();
      const ended = current.status();
      closed.framesDecoded += ended.framesDecoded;
      closed.framesSkipped += ended.framesSkipped;
      status.nativeFps = ended.nativeFps ?? status.nativeFps;
    }
  }

  const onStreaming = (): void => {
    if (downSinceMs !== undefined) status.downtimeMs += clock.now() - downSinceMs;
    downSinceMs = undefined;
    status.state = 'streaming';
  };

  async function* generate(): AsyncGenerator<Frame> {
    downSinceMs = clock.now();
    let offline = false;
    for (let attempt = 0; !abort.signal.aborted; ) {
      status.state = 'connecting';
      try {
        for await (const frame of connection()) {
          attempt = 0;
          offline = false;
          status.lastFrameAtMs = clock.now();
          yield { ...frame, seq: status.framesEmitted++, captureTimeMs: status.lastFrameAtMs };
        }
        status.lastError = 'the stream ended';
      } catch (err) {
        status.lastError = redact(describeError(err));
        if (err instanceof PanoptesError && err.code === ErrorCode.SourceOffline) {
          if (!offline) logger.info({ retryInMs: offlineRetryMs }, `offline: ${status.lastError}`);
          offline = true;
          status.state = 'offline';
          downSinceMs ??= clock.now();
          await clock.sleep(offlineRetryMs, abort.signal).catch(() => undefined);
          continue;
        }
      }
      if (abort.signal.aborted) break;
      downSinceMs ??= clock.now();
      status.reconnects += 1;
      status.state = 'waiting';
      const waitMs = backoffMs(attempt++, backoff, random);
      logger.warn({ reason: status.lastError, retryInMs: Math.round(waitMs), reconnects: status.reconnects }, 'live stream lost; reconnecting');
      await clock.sleep(waitMs, abort.signal).catch(() => undefined);
    }
    status.state = 'stopped';
  }

  return {
    id,
    frames() {
      if (iterated) throw new Error(`source ${id}: frames() can be iterated only once`);
      iterated = true;
      return generate();
    },
    async stop() {
      abort.abort();
      await current?.stop();
      status.state = 'stopped';
    },
    status: () => {
      const live = current?.status();
      const input = options.inputStats?.();
      const running = live && live.state === 'running';
      return {
        ...status,
        framesDecoded: closed.framesDecoded + (running ? live.framesDecoded : 0),
        framesSkipped: closed.framesSkipped + (running ? live.framesSkipped : 0),
        downtimeMs: status.downtimeMs + (downSinceMs !== undefined && status.state !== 'stopped' ? clock.now() - downSinceMs : 0),
        nativeFps: status.nativeFps ?? live?.nativeFps,
        ...(input ? { adSegmentsSkipped: input.adSegmentsSkipped, segmentsMissed: input.segmentsMissed } : {}),
      };
    },
  };
}
