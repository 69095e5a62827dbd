/**
 * Frames a recording owes: how many sampled frames its duration and sampling policy promise,
 * and whether a replay that ended delivered clearly fewer (a truncated or damaged file, which
 * ffmpeg reads to where the data stops and then exits 0). Pure arithmetic, so it is tested
 * without ffmpeg.
 */
import type { SamplePolicy } from '../core/index.js';

/** A recording that ended early: sampled frames `delivered` .. `expected - 1` never came. */
export interface Shortfall {
  /** Sampled frames the container's duration and the sampling policy promise. */
  expected: number;
  /** Sampled frames ffmpeg delivered (readable or not). */
  delivered: number;
  /** `expected - delivered`. */
  missing: number;
  /** The container's duration. */
  durationMs: number;
  /** The pts of the last frame delivered: where the footage really stops. Undefined when none came. */
  endedAtMs: number | undefined;
}

export interface Sampling {
  /** The `fps` filter's rate, when one is applied (after any cap to the native rate). */
  fps?: number | undefined;
  sample?: SamplePolicy | undefined;
}

/**
 * Sampled frames per second of footage, or undefined when the policy cannot be counted ahead
 * (keyframes and scene changes depend on the content) or the native rate is unknown.
 */
export function sampledRate(nativeFps: number | undefined, sampling: Sampling): number | undefined {
  if (sampling.fps !== undefined) return sampling.fps;
  const { sample } = sampling;
  if (!sample) return nativeFps;
  return 'everyNth' in sample && nativeFps !== undefined ? nativeFps / sample.everyNth : undefined;
}

/** The sampled frames a recording of `durationMs` should give, when that can be known ahead. */
export function expectedFrames(durationMs: number | undefined, nativeFps: number | undefined, sampling: Sampling): number | undefined {
  const rate = sampledRate(nativeFps, sampling);
  if (durationMs === undefined || rate === undefined || !(rate > 0)) return undefined;
  // every Nth keeps frames 0, N, 2N, ...: a partial last group still gives its first frame.
  const sample = sampling.sample;
  if (sampling.fps === undefined && sample && 'everyNth' in sample && nativeFps !== undefined) {
    return Math.ceil(Math.round((durationMs / 1000) * nativeFps) / sample.everyNth);
  }
  // ffmpeg's fps filter and a constant-rate file both give duration × rate, rounded.
  return Math.round((durationMs / 1000) * rate);
}

/**
 * What "clearly fewer" means. A container's duration can run past its video (a longer audio
 * track, an edit list) and rates are averages, so a few frames or a second or two short is
 * not a truncated file; a shortfall counts when it is over all three of these.
 */
export const SHORTFALL_TOLERANCE = {
  /** Frames: rounding of duration × rate. */
  frames: 2,
  /** Seconds of footage: audio or an edit list ending after the video. */
  seconds: 2,
  /** Of the expected frames: average rates of variable-rate files. */
  fraction: 0.01,
} as const;

/** The shortfall of a replay that ended cleanly, or undefined when it delivered what it owed (or that is unknown). */
export function findShortfall(options: {
  durationMs: number | undefined;
  nativeFps: number | undefined;
  sampling: Sampling;
  delivered: number;
  endedAtMs: number | undefined;
}): Shortfall | undefined {
  const { durationMs, delivered } = options;
  const expected = expectedFrames(durationMs, options.nativeFps, options.sampling);
  const rate = sampledRate(options.nativeFps, options.sampling);
  if (expected === undefined || durationMs === undefined || rate === undefined) return undefined;
  const missing = expected - delivered;
  const tolerance = Math.max(SHORTFALL_TOLERANCE.frames, rate * SHORTFALL_TOLERANCE.seconds, expected * SHORTFALL_TOLERANCE.fraction);
  if (missing <= tolerance) return undefined;
  return { expected, delivered, missing, durationMs, endedAtMs: options.endedAtMs };
}

/**
 * One line for the warning, the summary and each drop's detail. It depends on the file only
 * (no clock), so a replay of the same file gives the same detail and the same drop row ids.
 */
export function describeShortfall(s: Shortfall): string {
  const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  const end = s.endedAtMs === undefined ? 'before its first frame' : `at ${seconds(s.endedAtMs)}`;
  return `the recording ends early: footage stops ${end} of its ${seconds(s.durationMs)}; ` +
    `${s.delivered} of ${s.expected} frames delivered, ${s.missing} missing (frame_seq ${s.delivered}..${s.expected - 1})`;
}
