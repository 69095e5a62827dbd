/** MPEG-TS segments for the HLS and Twitch tests, made by ffmpeg from a lavfi picture. */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { resolveFfmpegPath } from '../../ingest/index.js';

/**
 * Writes `<dir>/<prefix>0.ts`, `<prefix>1.ts`, ...: 1 s segments (H.264 + AAC, a keyframe each
 * second) of `seconds` of the lavfi `video`, timestamps starting at `tsOffsetS`.
 */
export function encodeSegments(dir: string, prefix: string, video: string, seconds: number, tsOffsetS = 0): void {
  execFileSync(resolveFfmpegPath(), [
    '-hide_banner', '-loglevel', 'error',
    '-f', 'lavfi', '-i', video,
    '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=22050',
    '-t', String(seconds),
    '-c:v', 'libx264', '-preset', 'ultrafast', '-g', '10', '-keyint_min', '10', '-sc_threshold', '0', '-pix_fmt', 'yuv420p',
    '-c:a', 'aac', '-b:a', '32k',
    '-output_ts_offset', String(tsOffsetS),
    '-f', 'segment', '-segment_time', '1', '-segment_format', 'mpegts', join(dir, `${prefix}%d.ts`),
  ]);
}
