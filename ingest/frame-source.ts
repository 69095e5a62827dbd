import type { Frame } from '../core/index.js';

/** What every source counts, file or live. */
export interface FrameCounts {
  framesEmitted: number;
  /** Frames ffmpeg decoded, before sampling. */
  framesDecoded: number;
  /** Frames sampled but not emitted because they were not a readable JPEG. */
  framesSkipped: number;
  /** The video stream's own frame rate as ffmpeg reported it, once known. */
  nativeFps: number | undefined;
}

/**
 * The port every kind of source meets: sampled, timestamped JPEG frames in order, a stop, a
 * status. Its adapters are the file source (replays, which end) and the live source (cameras,
 * listeners, HLS and Twitch, which reconnect and never end on their own); `openFrameSource`
 * picks one from a source's config.
 */
export interface FrameSource<Status extends FrameCounts = FrameCounts> {
  readonly id: string;
  /** The frames, in order; can be iterated once. */
  frames(): AsyncIterable<Frame>;
  /** Ends `frames()` without an error; resolves once ffmpeg has exited. */
  stop(): Promise<void>;
  status(): Status;
}
