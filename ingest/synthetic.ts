import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ensureDir, ErrorCode, PanoptesError, type Logger } from '../core/index.js';
import { resolveFfmpegPath, runFfmpeg } from './ffmpeg.js';

export interface SyntheticClip {
  /**
   * An ffmpeg lavfi graph, e.g. `testsrc2=size=640x360:rate=10`. `{font}` stands for a bold
   * sans-serif TrueType font shipped with Panoptes (DejaVu Sans Bold), for `drawtext`.
   */
  lavfi: string;
  durationS: number;
}

/**
 * Renders synthetic footage from ffmpeg's lavfi sources into `dir` once and returns its path;
 * later runs with the same graph and duration reuse the file. Matroska, because it can be
 * written to a pipe.
 */
export async function ensureSyntheticClip(id: string, clip: SyntheticClip, dir: string, logger: Logger): Promise<string> {
  const fingerprint = createHash('sha1').update(`${clip.lavfi}\n${clip.durationS}`).digest('hex').slice(0, 10);
  const path = join(dir, `${id}-${fingerprint}.mkv`);
  if (existsSync(path)) return path;
  // Footage lives under the data directory: a bad one is named as such.
  ensureDir(dir, 'dataDir');
  const partial = `${path}.partial`;
  const run = runFfmpeg({
    ffmpegPath: resolveFfmpegPath(),
    input: clip.lavfi.replaceAll('{font}', fontFile()),
    inputOptions: ['-f', 'lavfi'],
    outputOptions: ['-t', String(clip.durationS), '-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p', '-f', 'matroska'],
    logger,
  });
  try {
    await pipeline(run.stdout, createWriteStream(partial));
  } catch (err) {
    run.kill();
    await rm(partial, { force: true });
    throw new PanoptesError(ErrorCode.SourceDecode, `source ${id}: cannot write synthetic footage to ${partial}`, { cause: err, details: { source: id } });
  }
  const exit = await run.exited;
  if (exit.code !== 0) {
    await rm(partial, { force: true });
    const tail = run.stderrTail();
    // ffmpeg names the fault on its first line ("No such filter: 'x'"), then says where ("x: Invalid argument").
    const why = tail.trim().split('\n').slice(-2).map((line) => line.replace(/^\[[^\]]*\] /, '')).join('; ');
    throw new PanoptesError(ErrorCode.SourceDecode, `source ${id}: cannot render synthetic footage from "${clip.lavfi}": ${why}\n${tail}`, {
      details: { source: id, lavfi: clip.lavfi, code: exit.code },
    });
  }
  await rename(partial, path);
  logger.info({ source: id, path }, 'synthetic footage rendered');
  return path;
}

/** DejaVu Sans Bold from the `dejavu-fonts-ttf` package: the same glyphs on every machine. */
function fontFile(): string {
  return join(dirname(createRequire(import.meta.url).resolve('dejavu-fonts-ttf/package.json')), 'ttf', 'DejaVuSans-Bold.ttf');
}
