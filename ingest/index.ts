/**
 * Ingest: sources that turn video into sampled, timestamped JPEG frames (DESIGN.md §5).
 * The ffmpeg supervisor (`./ffmpeg.ts`) stays inside: only ingest spawns ffmpeg.
 */
export {
  createFileSource,
  type FileSource,
  type FileSourceOptions,
  type FileSourceState,
  type FileSourceStatus,
  type ReplaySpeed,
} from './file-source.js';
export { resolveFfmpegPath } from './ffmpeg.js';
export { gifDurationMs } from './gif-duration.js';
export { backoffMs, createLiveSource, DEFAULT_BACKOFF, type Backoff, type LiveSource, type LiveSourceOptions, type LiveSourceStatus } from './live-source.js';
export { JpegSplitter, readJpegSize, type JpegSize, type JpegSplitterOptions } from './jpeg-splitter.js';
export type { FrameCounts, FrameSource } from './frame-source.js';
export { isDelayTolerant, isLive, openFrameSource } from './sources.js';
export { createIngest, LATENCY_WINDOW, MAX_ENDED_SOURCES, runIngest, type Ingest, type IngestOptions, type LocalAnalysis, type SourceMetrics, type SourceOrigin, type SourceResult } from './worker.js';
export { ensureSyntheticClip, type SyntheticClip } from './synthetic.js';
export { createHlsStats, followHls, type FollowHlsOptions, type HlsStats, type HlsStream } from './hls.js';
export { chooseVariant, parseMasterPlaylist, parseMediaPlaylist, type HlsVariant } from './hls-playlist.js';
export { resolveTwitch, twitchConnect, TWITCH_WEB_CLIENT_ID, type TwitchConnect, type TwitchOptions } from './twitch.js';
