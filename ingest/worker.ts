import { statSync } from 'node:fs';
import { join } from 'node:path';
import {
  describeError,
  frameContract,
  isUrl,
  Topics,
  type Bus,
  type Logger,
  type SourceConfig,
} from '../core/index.js';
import { createFileSource, type FileSource } from './file-source.js';
import { createLiveSource, type LiveSource } from './live-source.js';
import { ensureSyntheticClip } from './synthetic.js';

export interface IngestOptions {
  bus: Bus;
  sources: readonly SourceConfig[];
  /** Synthetic footage is rendered under `<dataDir>/footage`. */
  dataDir: string;
  logger: Logger;
  /** Stops every source; frames already read are still published. */
  signal?: AbortSignal;
  /** Frames published so far over all sources, and the expected total when every source has a known length. */
  onProgress?: (frames: number, total: number | undefined) => void;
}

export interface SourceResult {
  id: string;
  frames: number;
  /** Why the source stopped early; the other sources keep running. */
  error?: string;
}

/**
 * Runs each source until it ends and publishes its frames on `panoptes.frames`, keyed by
 * source id. A source that fails is logged and reported; it never stops the others.
 */
export async function runIngest(options: IngestOptions): Promise<SourceResult[]> {
  const { bus, logger } = options;
  const producer = bus.producer();
  const running = new Map<string, Source>();
  const published = new Map<string, number>();
  const report = (): void => {
    if (!options.onProgress) return;
    let frames = 0;
    let total: number | undefined = 0;
    for (const [id, source] of running) {
      frames += published.get(id) ?? 0;
      // A live stream has no length: no total.
      const status = source.status();
      const [durationMs, nativeFps] = 'durationMs' in status ? [status.durationMs, status.nativeFps] : [undefined, undefined];
      const config = options.sources.find((s) => s.id === id);
      const fps = config?.fps ?? nativeFps;
      // Keyframes and scene changes cannot be counted ahead; every Nth frame can.
      const sample = config?.sample;
      const sampled = !sample ? fps : 'everyNth' in sample && fps ? fps / sample.everyNth : undefined;
      if (total === undefined || durationMs === undefined || config?.loop || !sampled) total = undefined;
      else total += Math.ceil((durationMs / 1000) * sampled);
    }
    options.onProgress(frames, total);
  };
  const stopAll = (): void => {
    for (const source of running.values()) void source.stop();
  };
  options.signal?.addEventListener('abort', stopAll, { once: true });

  const runOne = async (config: SourceConfig): Promise<SourceResult> => {
    const sourceLogger = logger.child({ module: 'ingest', source: config.id });
    try {
      const path = config.synthetic
        ? await ensureSyntheticClip(config.id, config.synthetic, join(options.dataDir, 'footage'), sourceLogger)
        : config.path!;
      if (options.signal?.aborted) return { id: config.id, frames: 0 };
      const sampling = {
        logger: sourceLogger,
        ...(config.fps ? { fps: config.fps } : {}),
        ...(config.sample ? { sample: config.sample } : {}),
        ...(config.width ? { width: config.width } : {}),
      };
      const mediaStartMs = recordedAt(config, path);
      const source: Source = isLive(config)
        ? createLiveSource({ id: config.id, url: path, ...sampling })
        : createFileSource({ id: config.id, path, ...(mediaStartMs !== undefined ? { mediaStartMs } : {}), speed: config.speed, loop: config.loop, ...sampling });
      running.set(config.id, source);
      for await (const frame of source.frames()) {
        await producer.send(Topics.frames, [{ key: frame.source, value: frameContract.encode(frame), headers: frameContract.headers }]);
        published.set(config.id, frame.seq + 1);
        report();
      }
      return { id: config.id, frames: published.get(config.id) ?? 0 };
    } catch (err) {
      // One line for operators; the whole error (ffmpeg's stderr, stack) at debug level.
      sourceLogger.error({ code: (err as { code?: string }).code }, `source failed: ${describeError(err).split('\n')[0]}`);
      sourceLogger.debug({ err }, 'source failure details');
      return { id: config.id, frames: published.get(config.id) ?? 0, error: describeError(err) };
    }
  };

  try {
    return await Promise.all(options.sources.map(runOne));
  } finally {
    options.signal?.removeEventListener('abort', stopAll);
    await producer.close();
  }
}

type Source = FileSource | LiveSource;

/** Streams that never end by themselves: `live` when set, else the URL schemes of cameras and streams. */
function isLive(config: SourceConfig): boolean {
  return config.live ?? /^(rtsps?|rtmps?|udp|srt|tcp):\/\//i.test(config.path ?? '');
}

/**
 * When a file's footage starts, so that replaying it stamps the same `frame_time` every time:
 * the source's `startTime`, else the file's modification time. Undefined for URLs, whose frames
 * are stamped as they arrive.
 */
function recordedAt(config: SourceConfig, path: string): number | undefined {
  if (config.startTime) return Date.parse(config.startTime);
  if (isUrl(path)) return undefined;
  return Math.floor(statSync(path).mtimeMs);
}
