import { join } from 'node:path';
import { isUrl, type Logger, type SourceConfig } from '../core/index.js';
import { webInputOptions } from './ffmpeg.js';
import { createFileSource, type FileSource } from './file-source.js';
import { createHlsStats, followHls } from './hls.js';
import { createLiveSource, type LiveSource } from './live-source.js';
import { ensureSyntheticClip } from './synthetic.js';
import { twitchConnect } from './twitch.js';

/** How long ffmpeg waits on a recording's server (to connect, or for the next bytes) before it gives up. */
const RECORDING_URL_TIMEOUT_S = 20;
/** Longest a recording at a URL may go without a decoded frame (or its probe run). */
const RECORDING_URL_STALL_S = 60;

/** Streams that never end by themselves: `live` when set, else Twitch, listeners and the URL schemes of cameras and streams. */
export function isLive(config: SourceConfig): boolean {
  return config.live ?? (config.twitch !== undefined || config.listen === true || /^(rtsps?|rtmps?|udp|srt|tcp):\/\/|^\/dev\/video/i.test(config.path ?? ''));
}

/** Replays faster than real time: analyzed in full, in the time live work leaves (their frames carry no deadline). */
export function isDelayTolerant(config: SourceConfig): boolean {
  return !isLive(config) && config.speed !== 1;
}

/** The source a config describes: Twitch, an HLS stream, another live input, or a file to replay. */
export async function openFrameSource(config: SourceConfig, dataDir: string, logger: Logger): Promise<FileSource | LiveSource> {
  const sampling = {
    logger,
    ...(config.fps ? { fps: config.fps } : {}),
    ...(config.sample ? { sample: config.sample } : {}),
    ...(config.width ? { width: config.width } : {}),
  };
  if (config.twitch) {
    const twitch = config.twitch;
    const connect = twitchConnect({
      channel: twitch.channel,
      quality: twitch.quality,
      ...secret('clientId', twitch.clientId),
      ...secret('oauthToken', twitch.oauthToken),
      ...(twitch.gqlUrl ? { gqlUrl: twitch.gqlUrl } : {}),
      ...(twitch.usherUrl ? { usherUrl: twitch.usherUrl } : {}),
      logger,
    });
    return createLiveSource({ id: config.id, url: `twitch://${twitch.channel}`, connect, inputStats: () => connect.stats, ...sampling });
  }
  const path = config.synthetic ? await ensureSyntheticClip(config.id, config.synthetic, join(dataDir, 'footage'), logger) : config.path!;
  if (isLive(config) && isHlsUrl(path)) {
    // Followed here rather than by ffmpeg: ad breaks are skipped and signed URLs stay off its command line.
    const stats = createHlsStats();
    const connect = async (signal: AbortSignal) => {
      const stream = followHls({ url: path, signal, logger, stats });
      await stream.ready();
      return stream;
    };
    return createLiveSource({ id: config.id, url: path, connect, inputStats: () => stats, ...sampling });
  }
  if (isLive(config)) {
    return createLiveSource({ id: config.id, url: path, ...(config.listen ? { listen: true } : {}), ...(config.rtspTransport ? { rtspTransport: config.rtspTransport } : {}), ...sampling });
  }
  const mediaStartMs = recordedAt(config);
  // A recording at a URL: a server that accepts the connection and never answers fails the
  // source after the timeout, and one that sends too little to decode after the stall limit,
  // instead of holding it for ever.
  const network = isUrl(path) ? { inputOptions: ['-rw_timeout', String(RECORDING_URL_TIMEOUT_S * 1_000_000), ...webInputOptions(path)], stallMs: RECORDING_URL_STALL_S * 1000 } : {};
  return createFileSource({ id: config.id, path, ...(mediaStartMs !== undefined ? { mediaStartMs } : {}), speed: config.speed, loop: config.loop, ...network, ...sampling });
}

const isHlsUrl = (path: string): boolean => /^https?:\/\/[^?#]*\.m3u8?([?#]|$)/i.test(path);

const secret = <K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> => (value ? ({ [key]: value } as Record<K, string>) : {});

/** The `startTime` a deployment (or `replay --start-time`) gives; else the file source reads the container's. */
function recordedAt(config: SourceConfig): number | undefined {
  return config.startTime ? Date.parse(config.startTime) : undefined;
}
