/**
 * A live source (a camera or stream URL): the file source's ffmpeg pipeline, kept alive. When
 * the stream ends, fails or stalls (no frame for `stallMs`), ffmpeg is stopped and started again
 * after an exponential backoff with jitter; the first frame of a connection resets the backoff.
 * Frames are stamped with the wall clock when they are read (a camera's pts is not a time of
 * day) and numbered on across reconnects.
 */
import { describeError, silentLogger, systemClock, type Clock, type Frame, type Logger, type SamplePolicy } from '../core/index.js';
import { createFileSource, type FileSource } from './file-source.js';

export interface Backoff {
  initialMs: number;
  maxMs: number;
  /** Each wait is scaled by a uniform factor in [1 - jitter, 1 + jitter], so cameras lost together do not retry together. */
  jitter: number;
}

export const DEFAULT_BACKOFF: Backoff = { initialMs: 500, maxMs: 30_000, jitter: 0.2 };

export interface LiveSourceOptions {
  id: string;
  /** Anything ffmpeg reads live: rtsp://, rtmp://, http(s):// (MJPEG, MPEG-TS, HLS), udp://, srt://. */
  url: string;
  fps?: number;
  sample?: SamplePolicy;
  width?: number;
  quality?: number;
  /** No frame for this long counts as a lost stream. @defaultValue 10000 */
  stallMs?: number;
  backoff?: Backoff;
  logger?: Logger;
  ffmpegPath?: string;
  clock?: Clock;
  /** @defaultValue Math.random */
  random?: () => number;
}

export interface LiveSourceStatus {
  state: 'idle' | 'connecting' | 'streaming' | 'waiting' | 'stopped';
  framesEmitted: number;
  /** Connections lost so far (ended, failed or stalled). */
  reconnects: number;
  lastFrameAtMs: number | undefined;
  /** Why the last connection was lost. */
  lastError: string | undefined;
}

export interface LiveSource {
  readonly id: string;
  /** The frames, until `stop()`; never ends or throws on its own. Can be iterated once. */
  frames(): AsyncIterable<Frame>;
  stop(): Promise<void>;
  status(): LiveSourceStatus;
}

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
 * default five would delay the first frame), and RTSP over TCP (UDP loses frames on busy links).
 */
function lowLatencyInput(url: string): string[] {
  return [
    '-fflags', 'nobuffer', '-flags', 'low_delay', '-analyzeduration', '1000000', '-probesize', '1000000',
    ...(/^rtsps?:/i.test(url) ? ['-rtsp_transport', 'tcp'] : []),
  ];
}

export function createLiveSource(options: LiveSourceOptions): LiveSource {
  const { id, url } = options;
  const clock = options.clock ?? systemClock;
  const random = options.random ?? Math.random;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  const stallMs = options.stallMs ?? 10_000;
  const logger = (options.logger ?? silentLogger()).child({ module: 'ingest.live-source', source: id });
  const abort = new AbortController();
  const status: LiveSourceStatus = { state: 'idle', framesEmitted: 0, reconnects: 0, lastFrameAtMs: undefined, lastError: undefined };
  let current: FileSource | undefined;
  let iterated = false;

  /** The next frame of this connection, or a Stalled error when none comes in time. */
  const nextWithin = async (frames: AsyncIterator<Frame>): Promise<IteratorResult<Frame>> => {
    let timer: NodeJS.Timeout | undefined;
    const next = frames.next();
    next.catch(() => undefined); // settled by stop() after a stall; nobody waits for it then
    try {
      return await Promise.race([next, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Stalled(stallMs)), stallMs)))]);
    } finally {
      clearTimeout(timer);
    }
  };

  async function* generate(): AsyncGenerator<Frame> {
    for (let attempt = 0; !abort.signal.aborted; ) {
      status.state = 'connecting';
      current = createFileSource({
        id,
        path: url,
        speed: 'max',
        loop: false,
        inputOptions: lowLatencyInput(url),
        logger,
        ...(options.fps !== undefined ? { fps: options.fps } : {}),
        ...(options.sample ? { sample: options.sample } : {}),
        ...(options.width !== undefined ? { width: options.width } : {}),
        ...(options.quality !== undefined ? { quality: options.quality } : {}),
        ...(options.ffmpegPath ? { ffmpegPath: options.ffmpegPath } : {}),
      });
      const frames = current.frames()[Symbol.asyncIterator]();
      try {
        for (let next = await nextWithin(frames); !next.done; next = await nextWithin(frames)) {
          attempt = 0;
          status.state = 'streaming';
          status.lastFrameAtMs = clock.now();
          yield { ...next.value, seq: status.framesEmitted++, captureTimeMs: status.lastFrameAtMs };
        }
        status.lastError = 'the stream ended';
      } catch (err) {
        status.lastError = describeError(err);
      } finally {
        await current.stop();
      }
      if (abort.signal.aborted) break;
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
    status: () => ({ ...status }),
  };
}
