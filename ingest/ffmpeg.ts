/**
 * The ffmpeg binary and the one supervisor that runs it. This is the only module in Panoptes
 * that spawns ffmpeg (through fluent-ffmpeg).
 */
import type { ChildProcess } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Readable } from 'node:stream';
import ffmpeg from 'fluent-ffmpeg';
import { ErrorCode, PanoptesError, type Logger } from '../core/index.js';

const INSTALLER_PACKAGE = '@ffmpeg-installer/ffmpeg';

/**
 * The ffmpeg binary to run: `explicit` (a source option) wins, then `FFMPEG_PATH`, then the
 * static binary shipped in `@ffmpeg-installer/ffmpeg`.
 * @throws PanoptesError FfmpegNotFound naming the path tried and where it came from
 */
export function resolveFfmpegPath(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  const [path, from] = explicit
    ? [explicit, 'the ffmpegPath option']
    : env.FFMPEG_PATH
      ? [env.FFMPEG_PATH, 'FFMPEG_PATH']
      : [installerPath(), INSTALLER_PACKAGE];
  try {
    accessSync(path, constants.X_OK);
    if (!statSync(path).isFile()) throw new Error('not a file');
  } catch (cause) {
    throw new PanoptesError(ErrorCode.FfmpegNotFound, `ffmpeg not found at ${path} (from ${from})`, {
      cause,
      details: { path, from },
    });
  }
  return path;
}

/** Loaded lazily: the installer throws at import time when its binary is missing. */
function installerPath(): string {
  try {
    const installer = createRequire(import.meta.url)(INSTALLER_PACKAGE) as { path: string };
    return installer.path;
  } catch (thrown) {
    // The installer throws a bare string that lists the paths it tried.
    const reason = thrown instanceof Error ? thrown.message : String(thrown);
    throw new PanoptesError(ErrorCode.FfmpegNotFound, `ffmpeg not found (${INSTALLER_PACKAGE}): ${reason}`, {
      cause: thrown,
      details: { from: INSTALLER_PACKAGE },
    });
  }
}

/** The most pixels a picture ffmpeg decodes may have (`-max_pixels`), as the backend's bound on a frame: an 8K camera fits. */
export const MAX_PIXELS = 8192 * 8192;

/**
 * ffmpeg input options that keep a stream at an http(s) URL on the web's protocols. Without them
 * whatever the server sends picks what ffmpeg opens next: an SDP description served over HTTP
 * makes it listen for RTP on a UDP port of every interface, where anyone on the network can
 * send it pictures. A recording, or a stream, over HTTP needs nothing more (`crypto` decrypts
 * an HLS stream's AES-128 segments).
 */
export function webInputOptions(url: string | undefined): string[] {
  return /^https?:\/\//i.test(url ?? '') ? ['-protocol_whitelist', 'http,https,tcp,tls,crypto'] : [];
}

/** What ffmpeg prints about an input before it decodes anything. */
export interface MediaInfo {
  /** The container's duration; undefined for live streams and formats without one (GIF). */
  durationMs: number | undefined;
  /** The first video stream's frame rate (its average rate for variable-rate files). */
  fps: number | undefined;
}

/**
 * The input's duration and first video stream's rate, from the lines `ffmpeg -i` prints about
 * it: `  Duration: 00:00:30.21, start: ...` (two spaces in), then `    Stream #0:0(eng): Video:
 * h264 ..., 12.50 fps, ...` (four in ffmpeg 4, two from ffmpeg 6). Only lines of that shape count,
 * a stream only after the duration line and before the output's lines: the footage's metadata is
 * printed too (the container's before the duration, each stream's further in after it), and a
 * title or tag that reads like either line must not set the numbers the frame accounting trusts
 * (docs/security.md).
 */
export function mediaInfoReader(): { info: MediaInfo; onLine(line: string): void } {
  const info: MediaInfo = { durationMs: undefined, fps: undefined };
  let durationSeen = false;
  let inputDone = false;
  return {
    info,
    onLine(line) {
      if (inputDone || /^(?:Output #|Stream mapping:)/.test(line)) {
        inputDone = true;
        return;
      }
      if (!durationSeen) {
        const m = /^ {2}Duration: (?:(\d+):(\d\d):(\d\d(?:\.\d+)?)|N\/A)/.exec(line);
        if (!m) return;
        durationSeen = true;
        if (m[1] !== undefined) info.durationMs = ((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3])) * 1000;
        return;
      }
      if (info.fps !== undefined) return;
      const m = /^ {2,4}Stream #\d+:\d+\S*: Video: .* ([\d.]+) fps\b/.exec(line);
      if (m) info.fps = Number(m[1]);
    },
  };
}

/**
 * `    creation_time   : 2018-04-19T22:46:00.000000Z`, in the input's metadata: when the
 * footage was recorded, as the camera or the muxer said. A zero or unparsable date is no date.
 */
export function parseCreationTimeMs(line: string): number | undefined {
  const m = /^\s+creation_time\s*:\s*(\d{4}-\d\d-\d\dT[\d:.]+Z?)\s*$/.exec(line);
  const ms = m ? Date.parse(m[1]!) : NaN;
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}

/**
 * Reads an input's duration and frame rate without decoding it: `ffmpeg -i` with an output of
 * no frames (the project ships ffmpeg only, no ffprobe). The input lines come before the
 * output's, so the first matches are the input's. Never throws: a failed probe gives
 * undefined fields, and the run that follows reports why the input can't be read.
 */
export async function probeMedia(options: { ffmpegPath: string; input: string; inputOptions?: readonly string[]; logger: Logger; timeoutMs?: number }): Promise<MediaInfo & { timedOut?: true }> {
  const reader = mediaInfoReader();
  const run = runFfmpeg({
    ffmpegPath: options.ffmpegPath,
    input: options.input,
    // Reading the stream's parameters decodes a picture: no larger than a source's may be.
    inputOptions: ['-hide_banner', '-nostdin', '-max_pixels', String(MAX_PIXELS), ...(options.inputOptions ?? [])],
    outputOptions: ['-map', '0:v:0', '-frames:v', '0', '-f', 'null'],
    onStderrLine: (line) => {
      reader.onLine(line);
      return false;
    },
    logger: options.logger,
  });
  run.stdout.resume();
  // A server that sends a byte at a time would hold the probe for ever.
  let timedOut = false;
  const limit = options.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), run.kill('SIGKILL')), options.timeoutMs);
  await run.exited;
  clearTimeout(limit);
  return timedOut ? { ...reader.info, timedOut } : reader.info;
}

/** How an ffmpeg run ended. */
export interface FfmpegExit {
  /** Exit code; null when killed by a signal or never started. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be spawned at all. */
  spawnError?: Error;
  /** Set when a stream input failed; ffmpeg was killed for it. */
  inputError?: Error;
}

export interface FfmpegRunOptions {
  ffmpegPath: string;
  /** A path or URL, or a byte stream piped into ffmpeg's stdin. */
  input: string | Readable;
  /** Options placed before `-i input` (e.g. `-stream_loop -1`). */
  inputOptions?: string[];
  /** Options after the input; the output itself is always `pipe:1`. */
  outputOptions: string[];
  /**
   * Sees every stderr line as it arrives. Return true for a line that is data rather than a
   * message (e.g. showinfo output) to keep it out of the stderr tail.
   */
  onStderrLine?: (line: string) => boolean;
  /**
   * How many stderr lines to keep for error messages.
   * @defaultValue 20
   */
  tailLines?: number;
  logger: Logger;
}

/** One running ffmpeg command whose output is a byte stream on stdout. */
export interface FfmpegRun {
  /**
   * ffmpeg's stdout. Reading it slowly pauses ffmpeg (the pipe fills and ffmpeg blocks on
   * write), so nothing is buffered without bound.
   */
  readonly stdout: Readable;
  /** Resolves (never rejects) once ffmpeg has exited and its stderr has been read to the end. */
  readonly exited: Promise<FfmpegExit>;
  /** The process id once spawned. */
  pid(): number | undefined;
  /** The last stderr lines, newline-joined, for error messages. */
  stderrTail(): string;
  /** Sends a signal now, or as soon as the process exists. */
  kill(signal?: NodeJS.Signals): void;
}

/** Starts `ffmpeg [inputOptions] -i input [outputOptions] pipe:1` under supervision (`-i pipe:0` for a stream input). */
export function runFfmpeg(options: FfmpegRunOptions): FfmpegRun {
  const { logger } = options;
  const tailLines = options.tailLines ?? 20;
  const tail: string[] = [];
  let proc: ChildProcess | undefined;
  let pendingSignal: NodeJS.Signals | undefined;
  let inputError: Error | undefined;

  const command = ffmpeg(options.input)
    .setFfmpegPath(options.ffmpegPath) // fluent-ffmpeg keeps this per process, not per command
    .inputOptions(options.inputOptions ?? [])
    .outputOptions(options.outputOptions);

  let resolveExit!: (exit: FfmpegExit) => void;
  const exited = new Promise<FfmpegExit>((resolve) => {
    resolveExit = resolve;
  });

  command.on('stderr', (line: string) => {
    if (options.onStderrLine?.(line)) return;
    if (line.trim() === '') return;
    tail.push(line);
    if (tail.length > tailLines) tail.shift();
  });

  command.on('start', (commandLine: string) => {
    logger.debug({ commandLine }, 'ffmpeg started');
    proc = (command as unknown as { ffmpegProc?: ChildProcess }).ffmpegProc;
    if (!proc?.stderr) return; // not reached: fluent-ffmpeg sets ffmpegProc before 'start'
    // Exit is known when the process has exited and its stderr (the error text) is fully read.
    const exit = new Promise<Pick<FfmpegExit, 'code' | 'signal'>>((resolve) => {
      proc?.once('exit', (code, signal) => resolve({ code, signal }));
    });
    const stderrClosed = new Promise<void>((resolve) => proc?.stderr?.once('close', () => resolve()));
    proc.once('error', (spawnError) => resolveExit({ code: null, signal: null, spawnError }));
    void Promise.all([exit, stderrClosed]).then(([status]) => resolveExit({ ...status, ...(inputError ? { inputError } : {}) }));
    if (pendingSignal) proc.kill(pendingSignal);
  });

  // fluent-ffmpeg reports every failure here, including exits we classify ourselves from
  // `exited`; only a failure before the process started, or of the input stream, is news.
  command.on('error', (err: Error & { inputStreamError?: Error }) => {
    inputError ??= err.inputStreamError;
    // fluent-ffmpeg sends SIGTERM, which ffmpeg ignores while blocked reading its stdin.
    if (err.inputStreamError) proc?.kill('SIGKILL');
    if (!proc) resolveExit({ code: null, signal: null, spawnError: err });
  });

  const stdout = command.pipe() as Readable;

  return {
    stdout,
    exited,
    pid: () => proc?.pid,
    stderrTail: () => tail.join('\n'),
    kill: (signal = 'SIGKILL') => {
      if (proc) {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      } else {
        pendingSignal = signal;
      }
    },
  };
}
