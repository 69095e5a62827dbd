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
export { backoffMs, createLiveSource, DEFAULT_BACKOFF, type Backoff, type LiveSource, type LiveSourceOptions, type LiveSourceStatus } from './live-source.js';
export { JpegSplitter, readJpegSize, type JpegSize, type JpegSplitterOptions } from './jpeg-splitter.js';
export { runIngest, type IngestOptions, type SourceResult } from './worker.js';
export { ensureSyntheticClip, type SyntheticClip } from './synthetic.js';
