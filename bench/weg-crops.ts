// The labelled pools of `npm run bench -- weg`: crops cut from the shared footage, split in time
// into the half a template's head trains on and the half traces are drawn from, kept in
// `.cache/bench-weg/` for the next run.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { decodeJpeg, encodeJpeg, type FeatureExtractor, type LabelledPool, type RgbImage } from '../analyzers/index.js';
import { createLogger, projectRoot } from '../core/index.js';
import { createFileSource } from '../ingest/index.js';

export const logger = createLogger({ level: 'warn' });
export const footage = join(projectRoot(), '../shared/footage');

export interface Crop {
  image: RgbImage;
  /** Held out: traces are drawn from these; the template's head trains on the others. */
  test: boolean;
  /** The oracle's label, given once the crops are loaded (never cached: see objectsWorkload). */
  label: string;
}

const CACHE_VERSION = 4;
/** Halves in time: alternate blocks of this length, or of half the clip where it is shorter. */
const SPLIT_BLOCK_MS = 10_000;

/** `build`'s crops, or those it built last time with the same `key` (JPEG, quality 95). */
export async function cachedCrops(name: string, key: readonly (string | Buffer)[], build: () => Promise<Crop[]>): Promise<Crop[]> {
  const hash = createHash('sha256').update(String(CACHE_VERSION));
  for (const part of key) hash.update(part);
  const cache = join(projectRoot(), '.cache/bench-weg', `${name}-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(`${cache}.json`)) {
    const index = JSON.parse(readFileSync(`${cache}.json`, 'utf8')) as { test: boolean; bytes: number }[];
    const blob = readFileSync(`${cache}.bin`);
    let offset = 0;
    const crops: Crop[] = [];
    for (const { test, bytes } of index) {
      crops.push({ image: await decodeJpeg(blob.subarray(offset, offset + bytes)), test, label: '' });
      offset += bytes;
    }
    console.log(`  ${crops.length} crops from ${cache}.json`);
    return crops;
  }
  // Decoded again from the JPEGs, so that this run sees the pixels every later one will.
  const built = await build();
  const jpegs = await Promise.all(built.map((c) => encodeJpeg(c.image, 95)));
  mkdirSync(dirname(cache), { recursive: true });
  writeFileSync(`${cache}.bin`, Buffer.concat(jpegs));
  writeFileSync(`${cache}.json`, JSON.stringify(built.map((c, i) => ({ test: c.test, bytes: jpegs[i]!.byteLength }))));
  return Promise.all(built.map(async (c, i) => ({ ...c, image: await decodeJpeg(jpegs[i]!) })));
}

/**
 * A clip's frames at `fps`, `batchSize` at a time, to `cut` (which returns the crops it found in
 * them); each crop is then put in its half by its frame's time.
 */
export async function cropsOfClip(clip: string, fps: number, batchSize: number, cut: (frames: RgbImage[]) => Promise<RgbImage[][]>): Promise<Crop[]> {
  const found: { image: RgbImage; timeMs: number }[] = [];
  let batch: { image: RgbImage; timeMs: number }[] = [];
  const flush = async (): Promise<void> => {
    const crops = await cut(batch.map((f) => f.image));
    crops.forEach((list, i) => found.push(...list.map((image) => ({ image, timeMs: batch[i]!.timeMs }))));
    batch = [];
  };
  let frames = 0;
  for await (const frame of createFileSource({ id: clip, path: join(footage, clip), fps, speed: 'max', loop: false, logger }).frames()) {
    batch.push({ image: await decodeJpeg(frame.jpeg), timeMs: (frames++ * 1000) / fps });
    if (batch.length === batchSize) await flush();
  }
  if (batch.length > 0) await flush();
  const block = Math.min(SPLIT_BLOCK_MS, (frames * 1000) / fps / 2);
  console.log(`  ${clip}: ${frames} frames at ${fps} fps, ${found.length} crops`);
  return found.map(({ image, timeMs }) => ({ image, test: Math.floor(timeMs / block) % 2 === 1, label: '' }));
}

export async function inBatches<T>(images: readonly RgbImage[], run: (images: RgbImage[]) => Promise<T[]>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < images.length; i += 16) out.push(...(await run(images.slice(i, i + 16))));
  return out;
}

/** Row-major features of each image. */
export async function featuresOf(extractor: FeatureExtractor, images: readonly RgbImage[]): Promise<Float32Array> {
  const rows = await inBatches(images, async (batch) => [await extractor.features(batch)]);
  const out = new Float32Array(images.length * extractor.featureCount);
  let offset = 0;
  for (const row of rows) {
    out.set(row, offset);
    offset += row.length;
  }
  return out;
}

/** The crops pre-forwarded through a template's feature layers, with their labels (thesis §5.2). */
export async function poolOf(extractor: FeatureExtractor, crops: readonly Crop[]): Promise<LabelledPool> {
  const features = await featuresOf(extractor, crops.map((c) => c.image));
  return { featureCount: extractor.featureCount, features, labels: crops.map((c) => c.label) };
}
