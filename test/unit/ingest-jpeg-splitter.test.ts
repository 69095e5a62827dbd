import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JpegSplitter, readJpegSize, resolveFfmpegPath } from '../../ingest/index.js';

/** `ff <marker> <len16> payload`: a JPEG segment. */
function segment(marker: number, payload: number[]): number[] {
  const length = payload.length + 2;
  return [0xff, marker, length >> 8, length & 0xff, ...payload];
}

const ascii = (text: string): number[] => [...Buffer.from(text, 'latin1')];

/**
 * A progressive-style JPEG by hand (the splitter reads structure, not pixels): SOF2, two scans
 * with a DHT between them, stuffed `ff 00` bytes, restart markers and fill bytes before EOI.
 */
const progressive = Buffer.from([
  0xff, 0xd8,
  ...segment(0xe0, [...ascii('JFIF\0'), 1, 1, 0, 0, 1, 0, 1, 0, 0]),
  ...segment(0xc2, [8, 0, 16, 0, 32, 1, 1, 0x11, 0]), // 32x16
  ...segment(0xc4, [0x00, ...new Array<number>(16).fill(0)]),
  ...segment(0xda, [1, 1, 0x00, 0, 0, 0]),
  0x12, 0xff, 0x00, 0x34, 0xff, 0xd3, 0x56, 0xff, 0x00, 0xff, 0xd4, 0x78,
  ...segment(0xc4, [0x10, ...new Array<number>(16).fill(0)]),
  ...segment(0xda, [1, 1, 0x00, 1, 63, 0]),
  0x9a, 0xff, 0x00, 0xbc, 0xff, 0x00,
  0xff, 0xff, 0xd9, // a fill byte, then EOI
]);

/** A JPEG whose APP1 segment carries a whole thumbnail JPEG (with its own SOI and EOI). */
function withThumbnail(outer: Buffer, thumbnail: Buffer): Buffer {
  const app1 = Buffer.from(segment(0xe1, [...ascii('Exif\0\0'), ...thumbnail]));
  return Buffer.concat([outer.subarray(0, 2), app1, outer.subarray(2)]);
}

function splitInChunks(stream: Buffer, cuts: number[]): { images: Buffer[]; splitter: JpegSplitter } {
  const splitter = new JpegSplitter();
  const images: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts, stream.length]) {
    images.push(...splitter.push(stream.subarray(from, cut)));
    from = cut;
  }
  return { images, splitter };
}

let dir: string;
/** Real JPEGs from ffmpeg's mjpeg encoder, each a separate file (the ground truth). */
let real: Buffer[];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'panoptes-jpeg-'));
  execFileSync(resolveFfmpegPath(), [
    '-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=48x32:rate=10',
    '-frames:v', '3', '-q:v', '3', join(dir, 'f%d.jpg'),
  ]);
  real = [1, 2, 3].map((n) => readFileSync(join(dir, `f${n}.jpg`)));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('JpegSplitter', () => {
  it('finds every image whatever chunk boundary falls inside the stream', () => {
    const images = [...real, progressive, withThumbnail(real[0] as Buffer, real[1] as Buffer)];
    const stream = Buffer.concat(images);
    for (let cut = 0; cut <= stream.length; cut += 1) {
      const { images: found, splitter } = splitInChunks(stream, [cut]);
      if (found.length !== images.length || !found.every((image, i) => image.equals(images[i] as Buffer))) {
        throw new Error(`split at byte ${cut} of ${stream.length} gave ${found.length} images`);
      }
      expect(splitter.pendingBytes).toBe(0);
    }
  });

  it('handles one-byte chunks and random three-way splits', () => {
    const images = [...real, progressive];
    const stream = Buffer.concat(images);
    const oneByte = splitInChunks(stream, Array.from({ length: stream.length - 1 }, (_, i) => i + 1));
    expect(oneByte.images).toEqual(images);

    let seed = 42;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 300; round += 1) {
      const cuts = [random(stream.length), random(stream.length)].sort((a, b) => a - b);
      expect(splitInChunks(stream, cuts).images).toEqual(images);
    }
  });

  it('does not end an image at an ff d9 inside an APP segment (EXIF thumbnail)', () => {
    const image = withThumbnail(real[2] as Buffer, real[0] as Buffer);
    const { images } = splitInChunks(image, []);
    expect(images).toHaveLength(1);
    expect(images[0]?.equals(image)).toBe(true);
    expect(readJpegSize(image)).toEqual({ width: 48, height: 32 });
  });

  it('skips garbage between images and counts it', () => {
    const garbage = Buffer.from([0x00, 0x01, 0xff, 0x00, 0xff, 0xff, 0x42]);
    const stream = Buffer.concat([garbage, real[0] as Buffer, garbage, real[1] as Buffer]);
    const { images, splitter } = splitInChunks(stream, [3, 100]);
    expect(images).toEqual([real[0], real[1]]);
    expect(splitter.skippedBytes).toBe(2 * garbage.length);
  });

  it('drops a truncated image when the next one starts', () => {
    const first = real[0] as Buffer;
    const truncated = first.subarray(0, first.length - 40); // cut inside the entropy-coded data
    const { images, splitter } = splitInChunks(Buffer.concat([truncated, real[1] as Buffer]), [truncated.length]);
    expect(images).toEqual([real[1]]);
    expect(splitter.skippedBytes).toBe(truncated.length);
  });

  it('holds an unfinished image until its EOI arrives, and gives up past maxImageBytes', () => {
    const image = real[0] as Buffer;
    const splitter = new JpegSplitter();
    expect(splitter.push(image.subarray(0, 100))).toEqual([]);
    expect(splitter.pendingBytes).toBe(100);
    const [whole] = splitter.push(image.subarray(100));
    expect(whole).toEqual(image);
    expect(whole?.buffer.byteLength).toBe(image.length); // its own memory, not Node's shared pool

    // Given up, it comes out empty in its place: the caller counts the frame it was.
    const small = new JpegSplitter({ maxImageBytes: 50 });
    expect(small.push(image.subarray(0, 100))).toEqual([Buffer.alloc(0)]);
    expect(small.pendingBytes).toBe(0);
    expect(small.push(image.subarray(100))).toEqual([]); // the rest of it is skipped
    expect(small.push(real[1] as Buffer)).toEqual([real[1]]);
  });
});

describe('readJpegSize', () => {
  it('reads baseline (SOF0) and progressive (SOF2) frame headers', () => {
    expect(readJpegSize(real[0] as Buffer)).toEqual({ width: 48, height: 32 });
    expect(readJpegSize(progressive)).toEqual({ width: 32, height: 16 });
  });

  it('returns undefined for bytes that are not a JPEG', () => {
    expect(readJpegSize(Buffer.from('not a jpeg'))).toBeUndefined();
    expect(readJpegSize((real[0] as Buffer).subarray(0, 10))).toBeUndefined();
  });
});
