import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeJpeg, type TensorData } from '../../analyzers/index.js';
import { preprocessCenternet } from '../../analyzers/models/detector/index.js';
import { projectRoot } from '../../core/index.js';

/** `count` real frames for CenterNet's input: the stills in test/fixtures/images, cycled, letterboxed as the detector does. */
export async function centernetStills(count: number): Promise<TensorData> {
  const dir = join(projectRoot(), 'test/fixtures/images');
  const files = (await readdir(dir)).filter((f) => f.endsWith('.jpg')).sort();
  const images = await Promise.all(files.map(async (f) => decodeJpeg(await readFile(join(dir, f)))));
  return preprocessCenternet(Array.from({ length: count }, (_, i) => images[i % images.length]!)).input;
}
