/**
 * The file/replay source: one ffmpeg process per source decodes a recorded clip, samples it,
 * scales it and JPEG-encodes it; this module splits the JPEG stream into frames, stamps each
 * with replay start + pts, and paces them to the replay speed.
 *
 * Timestamps: the filter chain ends in `showinfo`, which logs every frame leaving the filter
 * graph (`n:<k> pts:<p>`, after `config in time_base: <num>/<den>`) on stderr before the frame
 * is encoded and written to stdout. With `-vsync 0` each of those frames is exactly one JPEG, so
 * JPEG k gets the pts of showinfo line k. This one mechanism is right for a sampled rate
 * (`fps=N` gives pts k/N), for the native rate of variable-rate files (GIFs), for clips whose
 * first frame is not at 0, and across `-stream_loop` (ffmpeg keeps pts increasing).
 *
 * Backpressure: the consumer of `frames()` pulls; while it is busy nothing reads ffmpeg's
 * stdout, the pipe fills and ffmpeg blocks. Pacing (`speed`) is a wait before each yield, not
 * ffmpeg's `-re`, for the same reason; at speed 1 `-re` is added too, only to spread ffmpeg's
 * decoding over the replay (small JPEGs fit in the pipe, so ffmpeg would otherwise race ahead).
 *
 * Accounting: ffmpeg reads a truncated file to where its data stops and exits 0, so a clip that
 * ends early looks like a clean end. At the end the frames delivered are compared with those the
 * container's duration and the sampling promise (`./accounting.ts`); a clear shortfall is logged
 * and left in `status().shortfall` for the ingest worker to record as drops.
 */
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { ErrorCode, MIN_FPS, PanoptesError, silentLogger, systemClock, type Clock, type Frame, type Logger, type SamplePolicy } from '../core/index.js';
import { describeShortfall, expectedFrames, findShortfall, type Shortfall } from './accounting.js';
import { gifDurationMs } from './gif-duration.js';
import { MAX_PIXELS, mediaInfoReader, parseCreationTimeMs, probeMedia, resolveFfmpegPath, runFfmpeg, type FfmpegRun } from './ffmpeg.js';
import { classifyExit, type SourceErrorFactory } from './ffmpeg-exit.js';
import { JpegSplitter, readJpegSize } from './jpeg-splitter.js';
import type { FrameCounts, FrameSource } from './frame-source.js';
import { DamageTracker, MAX_OWED_SAMPLES, type DamagedSample } from './damage.js';
import { ShowinfoTimestamps } from './showinfo.js';
import { eachWithin } from './stall.js';

/** `1` = real time, `N` = N times faster, `'max'` = as fast as ffmpeg decodes. */
export type ReplaySpeed = number | 'max';

export interface FileSourceOptions {
  /** Source id from the deployment config; becomes `Frame.source`. */
  id: string;
  /** The clip to read (anything ffmpeg reads: mp4, mkv, gif, ...). */
  path: string;
  /** A byte stream (e.g. MPEG-TS segments) piped into ffmpeg instead of reading `path`, which then only names it in messages. */
  input?: Readable;
  /**
   * Frames per second to sample (ffmpeg's `fps` filter).
   * @defaultValue the clip's native rate (every decoded frame)
   */
  fps?: number;
  /**
   * One connection of a live stream (set by the live source). A recording's rate is read before
   * it starts (a quick `ffmpeg -i`) so that an `fps` above it samples every frame instead of
   * ffmpeg's `fps` filter repeating frames; a live stream is not probed (a second connection to
   * a camera costs seconds, a listener has nothing to probe), and an `fps` above its rate is
   * warned about once the rate is known. Nor is a live connection's end checked against a duration.
   * @defaultValue false
   */
  live?: boolean;
  /** Sample by frame count, keyframes or scene changes instead of `fps` (see {@link SamplePolicy}). */
  sample?: SamplePolicy;
  /** More ffmpeg input options, before `-i` (a live source's low-latency flags). */
  inputOptions?: readonly string[];
  /** No frame decoded for this long (or a probe that long) fails the source: a server can send a byte at a time for ever. @defaultValue no limit */
  stallMs?: number;
  /**
   * Scale to this width at decode, keeping the aspect ratio; rounded down to an even number,
   * and the height is made even too.
   * @defaultValue the clip's own size
   */
  width?: number;
  speed: ReplaySpeed;
  /** Replay the clip forever (`-stream_loop -1`); pts and seq keep increasing across loops. */
  loop: boolean;
  /**
   * Capture time of pts 0, ms since epoch.
   * @defaultValue the wall clock when the first frame comes out of ffmpeg, less its pts (at
   * the replay's speed): ffmpeg's start-up is not footage time, as a camera's frame exists only
   * once it is captured. So a paced replay's first frame is not already late for its SLO.
   */
  replayStartMs?: number;
  /**
   * When the footage was recorded (pts 0), ms since epoch: frames carry it + pts as
   * `mediaTimeMs`. @defaultValue the container's `creation_time` where it has one; else none,
   * and the capture time (the replay's) stands for it
   */
  mediaStartMs?: number;
  /**
   * JPEG quality as ffmpeg's `-q:v` for mjpeg: 2 (best) to 31 (smallest).
   * @defaultValue 5
   */
  quality?: number;
  logger?: Logger;
  /** ffmpeg binary; see {@link resolveFfmpegPath} for the default. */
  ffmpegPath?: string;
  /** @defaultValue the system clock */
  clock?: Clock;
}

export type FileSourceState = 'idle' | 'running' | 'ended' | 'stopped' | 'failed';

export interface FileSourceStatus extends FrameCounts {
  state: FileSourceState;
  /** ffmpeg's process id while it runs. */
  pid: number | undefined;
  /** The input's duration as ffmpeg reported it, once known (not for live streams). */
  durationMs: number | undefined;
  /** The rate the `fps` filter samples at: the `fps` option, or undefined once it was capped to every frame. */
  fps: number | undefined;
  /** Sampled frames the clip should give (from its duration and the sampling), when that can be known ahead. */
  expectedFrames: number | undefined;
  /** Set when the clip ended cleanly but clearly short of `expectedFrames` (a truncated file). */
  shortfall: Shortfall | undefined;
}

/**
 * A file replayed: its frames end when the clip ends (never with `loop`) or after `stop()`;
 * `frames()` throws a PanoptesError naming the source when the clip can't be read or ffmpeg dies.
 */
export type FileSource = FrameSource<FileSourceStatus> & {
  /** Samples of footage that cannot be analyzed since the last call (stretches ffmpeg could not decode, frames without a JPEG header), in order: each took a frame_seq and is owed a drop. */
  takeDamaged(): DamagedSample[];
};

const DEFAULT_QUALITY = 5;

export function createFileSource(options: FileSourceOptions): FileSource {
  validate(options);
  const { id, path } = options;
  const clock = options.clock ?? systemClock;
  const logger = (options.logger ?? silentLogger()).child({ module: 'ingest.file-source', source: id });
  const abort = new AbortController();
  let state: FileSourceState = 'idle';
  let framesEmitted = 0;
  let framesDecoded = 0;
  let framesSkipped = 0;
  const damage = new DamageTracker(() => logger.warn(`more than ${MAX_OWED_SAMPLES} samples of damaged footage: the rest are not recorded as drops (timestamps that leap after a broken packet?)`));
  /** A frame's frame_seq: the frames emitted and the samples owed as drops take them in turn. */
  const nextSeq = (): number => framesEmitted + damage.count;
  let durationMs: number | undefined;
  let nativeFps: number | undefined;
  /** The container's `creation_time`: when the footage was recorded, where it says. */
  let createdAtMs: number | undefined;
  let fps = options.fps;
  let shortfall: Shortfall | undefined;
  let lastPtsMs: number | undefined;
  let run: FfmpegRun | undefined;
  let iterated = false;

  const mediaStartMs = (): number | undefined => options.mediaStartMs ?? createdAtMs;

  /** A PanoptesError that names this source. */
  const sourceError = (code: ErrorCode, what: string, details: Record<string, unknown> = {}, cause?: unknown) =>
    new PanoptesError(code, `source ${id} (${path}): ${what}`, {
      details: { source: id, path, ...details },
      // A server that is down now may be up later; a bad file stays bad.
      retriable: code === ErrorCode.FfmpegExited || code === ErrorCode.SourceUnavailable,
      cause,
    });

  async function* generate(): AsyncGenerator<Frame> {
    let ffmpegPath: string;
    try {
      if (!options.input && !isUrl(path)) await assertFileExists(path, sourceError);
      ffmpegPath = resolveFfmpegPath(options.ffmpegPath);
    } catch (err) {
      state = 'failed';
      throw err;
    }
    if (abort.signal.aborted) return;

    // A piped `input` cannot be read twice.
    if (fps !== undefined && !options.live && !options.input) {
      const probed = await probeMedia({ ffmpegPath, input: path, inputOptions: options.inputOptions ?? [], logger, ...(options.stallMs !== undefined ? { timeoutMs: options.stallMs } : {}) });
      if (probed.timedOut) throw sourceError(ErrorCode.SourceUnavailable, `reading the stream's parameters took over ${options.stallMs! / 1000} s: the server sends too little to decode`);
      if (probed.fps !== undefined && fps > probed.fps) {
        logger.warn(
          { fps, nativeFps: probed.fps },
          `fps ${fps} is above the source's own rate (${probed.fps} fps): sampling every frame (${probed.fps} fps) instead of repeating frames`,
        );
        fps = undefined;
      }
      if (abort.signal.aborted) return;
    }

    // ffmpeg reports no duration for a GIF: read from its frames' delays, for the replay's length.
    if (!options.input && !isUrl(path) && /\.gif$/i.test(path)) durationMs = await gifDurationMs(path).catch(() => undefined);

    let startedAt: number | undefined;
    const filters = filterChain(options, fps);
    let warnedAboveNative = false;
    const timestamps = new ShowinfoTimestamps(filters.length - 1, () => (framesDecoded += 1));
    const media = mediaInfoReader();
    const ffmpeg = runFfmpeg({
      ffmpegPath,
      input: options.input ?? path,
      inputOptions: [
        '-hide_banner', '-nostdin', '-nostats', '-loglevel', 'info',
        // A picture of more than 8192² pixels fails the source: a GIF of 45 bytes can claim 16000², which ffmpeg allocated as a gigabyte.
        '-max_pixels', String(MAX_PIXELS),
        ...(options.loop ? ['-stream_loop', '-1'] : []),
        // The decoder itself skips all but keyframes: nothing else is even decoded.
        ...(options.sample && 'keyframes' in options.sample ? ['-skip_frame', 'nokey'] : []),
        // A real-time replay decodes as a camera delivers: spread over the clip, not a burst at
        // start that takes the cores from the first frames' analysis.
        ...(options.speed === 1 ? ['-re'] : []),
        ...(options.inputOptions ?? []),
      ],
      outputOptions: [
        '-map', '0:v:0',
        '-vf', filters.join(','),
        '-vsync', '0',
        '-enc_time_base', '1:90000', // not from the average rate: a recording that pauses for minutes got colliding timestamps
        '-f', 'image2pipe',
        '-c:v', 'mjpeg',
        '-q:v', String(options.quality ?? DEFAULT_QUALITY),
      ],
      onStderrLine: (line) => {
        media.onLine(line);
        durationMs ??= media.info.durationMs;
        nativeFps ??= media.info.fps;
        createdAtMs ??= parseCreationTimeMs(line);
        // Not probed (a live stream): the filter repeats frames; say so once, not silently.
        if (!warnedAboveNative && fps !== undefined && nativeFps !== undefined && fps > nativeFps) {
          warnedAboveNative = true;
          logger.warn({ fps, nativeFps }, `fps ${fps} is above the stream's own rate (${nativeFps} fps): ffmpeg repeats frames to reach it`);
        }
        return timestamps.onLine(line);
      },
      logger,
    });
    run = ffmpeg;
    state = 'running';
    void ffmpeg.exited.then(() => timestamps.close());
    const splitter = new JpegSplitter();
    let inDamage = false;

    try {
      const stalled = (): PanoptesError => sourceError(ErrorCode.SourceUnavailable, `no frame decoded for ${options.stallMs! / 1000} s: the server sends too little to decode`, { stderr: ffmpeg.stderrTail() });
      const output = ffmpeg.stdout as AsyncIterable<Buffer>;
      // Decoded frames are progress too: sampling by scene change can leave a healthy stream without output for minutes.
      for await (const chunk of options.stallMs === undefined ? output : eachWithin(output, options.stallMs, stalled, () => framesDecoded)) {
        for (const jpeg of splitter.push(chunk)) {
          const out = await timestamps.next();
          if (out === undefined) {
            throw sourceError(ErrorCode.FfmpegExited, 'ffmpeg wrote a frame without its showinfo timestamp', {
              stderr: ffmpeg.stderrTail(),
            });
          }
          const { ptsMs } = out;
          lastPtsMs = ptsMs;
          // A live connection is renumbered by its source and its rate is not probed: not judged here.
          const damaged = options.live ? { took: 0, copy: false } : damage.see(out, nextSeq(), fps === undefined && !options.sample && nativeFps ? 1000 / nativeFps : undefined);
          // Once per damaged stretch (a copy of the fps filter's comes per sample).
          if (damaged.took > 0 && !inDamage) logger.warn({ ptsMs }, `ffmpeg could not decode the footage before ${(ptsMs / 1000).toFixed(1)} s: the samples it owed are recorded as drops`);
          inDamage = damaged.copy;
          if (damaged.copy) continue;
          const size = readJpegSize(jpeg);
          if (!size) {
            framesSkipped += 1;
            logger.warn({ seq: framesEmitted, ptsMs, bytes: jpeg.length }, jpeg.length === 0 ? 'skipping a frame whose JPEG is over 64 MiB' : 'skipping a frame without a JPEG frame header');
            // A recording's frame keeps its frame_seq, and is a drop (a live connection is renumbered by its source).
            if (!options.live) damage.owe(nextSeq(), ptsMs);
            continue;
          }
          startedAt ??= clock.now() - (options.speed === 'max' ? 0 : ptsMs / options.speed);
          if (options.speed !== 'max') {
            // Timers may fire a little early: wait until the due time has really passed.
            const dueAt = startedAt + ptsMs / options.speed;
            for (let wait = dueAt - clock.now(); wait > 0; wait = dueAt - clock.now()) {
              await clock.sleep(wait, abort.signal);
            }
          }
          if (abort.signal.aborted) return;
          const frame: Frame = {
            source: id,
            seq: nextSeq(),
            captureTimeMs: (options.replayStartMs ?? startedAt) + ptsMs,
            ...(mediaStartMs() !== undefined ? { mediaTimeMs: mediaStartMs()! + ptsMs } : {}),
            ptsMs,
            width: size.width,
            height: size.height,
            jpeg,
          };
          framesEmitted += 1;
          yield frame;
          if (abort.signal.aborted) return;
        }
      }

      const exit = await ffmpeg.exited;
      if (abort.signal.aborted) return;
      if (splitter.pendingBytes > 0) logger.debug({ bytes: splitter.pendingBytes }, 'ffmpeg output ended inside a JPEG');
      const failure = classifyExit(exit, ffmpeg.stderrTail(), framesEmitted, sourceError);
      if (failure) throw failure;
      logger.debug({ frames: framesEmitted }, 'clip ended');
      if (!options.loop && !options.live) {
        shortfall = findShortfall({ durationMs, nativeFps, sampling: { fps, sample: options.sample }, delivered: nextSeq(), endedAtMs: lastPtsMs });
        if (shortfall) logger.warn({ ...shortfall }, `source ${id} (${path}): ${describeShortfall(shortfall)}`);
      }
      state = 'ended';
    } catch (err) {
      if (abort.signal.aborted) return; // stop() interrupted a wait: not a failure
      state = 'failed';
      throw err;
    } finally {
      if (state === 'running') state = 'stopped';
      ffmpeg.kill();
      await ffmpeg.exited;
    }
  }

  return {
    id,
    takeDamaged: () => damage.take(),
    frames() {
      if (iterated) throw new Error(`source ${id}: frames() can be iterated only once`);
      iterated = true;
      return generate();
    },
    async stop() {
      abort.abort();
      if (!run) {
        state = 'stopped';
        return;
      }
      run.kill();
      await run.exited;
      if (state === 'running') state = 'stopped';
    },
    status: () => ({
      state,
      framesEmitted,
      framesDecoded,
      framesSkipped,
      durationMs,
      nativeFps,
      fps,
      expectedFrames: options.loop || options.live ? undefined : expectedFrames(durationMs, nativeFps, { fps, sample: options.sample }),
      shortfall,
      pid: state === 'running' ? run?.pid() : undefined,
    }),
  };
}

/**
 * `showinfo` to count decoded frames, the sampling (`fps=N` or `select`, before scaling),
 * `scale=W:-2`, then `showinfo` for the timestamps. `fps` is the rate after any cap. Neither showinfo checksums the pixels,
 * which would cost more than the JPEG encode.
 */
function filterChain(options: FileSourceOptions, fps: number | undefined): string[] {
  const filters: string[] = ['showinfo=checksum=0'];
  if (fps !== undefined) filters.push(`fps=${fps}`);
  const sample = options.sample;
  // Commas inside a filter's expression are escaped: unescaped, they would end the filter.
  if (sample && 'everyNth' in sample) filters.push(`select=not(mod(n\\,${sample.everyNth}))`);
  if (sample && 'sceneChange' in sample) filters.push(`select=eq(n\\,0)+gt(scene\\,${sample.sceneChange})`);
  if (options.width !== undefined) filters.push(`scale=${evenWidth(options.width)}:-2`);
  filters.push('showinfo=checksum=0');
  return filters;
}

function isUrl(path: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(path);
}

function evenWidth(width: number): number {
  return Math.floor(width / 2) * 2;
}

function validate(options: FileSourceOptions): void {
  if (!options.id) throw new TypeError('id: expected a non-empty string');
  if (!options.path) throw new TypeError(`source ${options.id}: path: expected a non-empty string`);
  const { fps, width, speed, quality, sample } = options;
  if (fps !== undefined && sample !== undefined) throw new RangeError(`source ${options.id}: fps and sample: use one of them`);
  // Below the minimum a clip gives no frame at all (or one), and the run would "succeed" empty.
  if (fps !== undefined && !(Number.isFinite(fps) && fps >= MIN_FPS)) {
    throw new RangeError(`source ${options.id}: fps: expected a number of at least ${MIN_FPS}, got ${fps}`);
  }
  if (width !== undefined && !(Number.isInteger(width) && width >= 2)) {
    throw new RangeError(`source ${options.id}: width: expected an integer >= 2, got ${width}`);
  }
  if (speed !== 'max' && !(Number.isFinite(speed) && speed > 0)) {
    throw new RangeError(`source ${options.id}: speed: expected a positive number or 'max', got ${String(speed)}`);
  }
  if (quality !== undefined && !(Number.isInteger(quality) && quality >= 2 && quality <= 31)) {
    throw new RangeError(`source ${options.id}: quality: expected an integer from 2 to 31, got ${quality}`);
  }
}

async function assertFileExists(path: string, sourceError: SourceErrorFactory): Promise<void> {
  try {
    await stat(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw sourceError(ErrorCode.SourceNotFound, 'file not found', {}, err);
    throw sourceError(ErrorCode.SourceDecode, `file unreadable (${code ?? 'unknown error'})`, {}, err);
  }
}
