import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel } from 'node:worker_threads';

import * as ort from 'onnxruntime-node';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';

import {
  CENTERNET,
  boxToInput,
  boxToSource,
  clipBox,
  cocoClassName,
  cocoLabels,
  decodeCenternet,
  iou,
  letterboxBatchNative,
  letterboxFor,
  nms,
  preprocessCenternet,
  sourceSize,
} from '../../analyzers/models/detector/index.js';
import type { Box, Detection, Letterbox, RgbImage, TensorData } from '../../analyzers/models/types.js';
import { createOnnxRuntime, loadModelRunner } from '../../analyzers/index.js';
import { decodeOnnxModel, encodeOnnxModel } from '../../analyzers/onnx/index.js';
import { loadModelZoo, silentLogger } from '../../core/index.js';
import { f32, solid } from '../helpers.js';

const MODEL = fileURLToPath(new URL('../../models/centernet.onnx', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../fixtures/images/', import.meta.url));

function det(classId: number, score: number, x1: number, y1: number, x2: number, y2: number): Detection {
  return { box: { x1, y1, x2, y2 }, classId, className: cocoClassName(classId), score };
}


function expectBoxClose(actual: Box, expected: Box, tol: number): void {
  for (const k of ['x1', 'y1', 'x2', 'y2'] as const) expect(Math.abs(actual[k] - expected[k])).toBeLessThanOrEqual(tol);
}

describe('coco labels', () => {
  it('has the 80 classes, 0-based, in the models order', () => {
    expect(cocoLabels).toHaveLength(80);
    expect(cocoLabels[0]).toBe('person');
    expect(cocoLabels[2]).toBe('car');
    expect(cocoLabels[7]).toBe('truck');
    expect(cocoLabels[67]).toBe('cell phone');
    expect(cocoLabels[79]).toBe('toothbrush');
    expect(new Set(cocoLabels).size).toBe(80);
    expect(cocoClassName(80)).toBe('class80');
  });
});

describe('iou', () => {
  it('computes overlap in continuous coordinates', () => {
    expect(iou({ x1: 0, y1: 0, x2: 10, y2: 10 }, { x1: 0, y1: 0, x2: 10, y2: 10 })).toBe(1);
    expect(iou({ x1: 0, y1: 0, x2: 10, y2: 10 }, { x1: 5, y1: 0, x2: 15, y2: 10 })).toBeCloseTo(50 / 150, 10);
    expect(iou({ x1: 0, y1: 0, x2: 10, y2: 10 }, { x1: 10, y1: 0, x2: 20, y2: 10 })).toBe(0); // touching
    expect(iou({ x1: 0, y1: 0, x2: 10, y2: 10 }, { x1: 2, y1: 2, x2: 4, y2: 4 })).toBeCloseTo(4 / 100, 10);
    expect(iou({ x1: 0, y1: 0, x2: 0, y2: 0 }, { x1: 0, y1: 0, x2: 0, y2: 0 })).toBe(0);
  });
});

describe('nms', () => {
  const a = det(2, 0.9, 0, 0, 100, 100); // car
  const b = det(2, 0.8, 10, 0, 110, 100); // car, IoU with a = 90/110 = 0.818
  const c = det(2, 0.7, 60, 0, 160, 100); // car, IoU with a = 40/160 = 0.25, with b = 50/150
  const d = det(7, 0.85, 0, 0, 100, 100); // truck on the same box as a
  const e = det(0, 0.95, 300, 300, 350, 400); // person elsewhere

  it('suppresses same-class boxes above the IoU threshold, keeps the rest, sorted by score', () => {
    const kept = nms([c, b, a, d, e], { iouThreshold: 0.5 });
    expect(kept).toEqual([e, a, d, c]);
  });

  it('is class-wise: a box of another class on the same spot survives', () => {
    expect(nms([a, d], { iouThreshold: 0.1 })).toEqual([a, d]);
    expect(nms([a, d], { iouThreshold: 0.1, classAgnostic: true })).toEqual([a]);
  });

  it('keeps a box whose IoU equals the threshold (suppression is IoU > threshold)', () => {
    const x = det(1, 0.9, 0, 0, 10, 10);
    const y = det(1, 0.8, 5, 0, 15, 10); // IoU exactly 1/3
    expect(nms([x, y], { iouThreshold: 1 / 3 })).toHaveLength(2);
    expect(nms([x, y], { iouThreshold: 0.33 })).toEqual([x]);
  });

  it('suppression is decided against kept boxes only (greedy)', () => {
    // b is suppressed by a; c overlaps b by 1/3 but b is gone, and c vs a = 0.25 < 0.3.
    expect(nms([a, b, c], { iouThreshold: 0.3 })).toEqual([a, c]);
  });

  it('honours maxDetections, ties keep input order, input untouched', () => {
    const input = [det(3, 0.5, 0, 0, 1, 1), det(4, 0.5, 5, 5, 6, 6), det(5, 0.9, 9, 9, 10, 10)];
    const copy = structuredClone(input);
    expect(nms(input, { iouThreshold: 0.5, maxDetections: 2 }).map((x) => x.classId)).toEqual([5, 3]);
    expect(input).toEqual(copy);
    expect(nms([], { iouThreshold: 0.5 })).toEqual([]);
  });
});

describe('letterbox', () => {
  it('fits, centres and records exact pads', () => {
    expect(letterboxFor(768, 432, 512, 512)).toEqual({ scale: 2 / 3, padX: 0, padY: 112, inputWidth: 512, inputHeight: 512 });
    const tall = letterboxFor(100, 400, 512, 512);
    expect(tall.scale).toBe(1.28);
    expect(tall.padX).toBeCloseTo(192, 10);
    expect(tall.padY).toBe(0);
  });

  it('recovers the source size exactly for awkward sizes', () => {
    for (const [w, h] of [[768, 432], [1920, 1080], [641, 479], [1, 1], [3, 1000], [1000, 3], [513, 512], [333, 777]] as const) {
      expect(sourceSize(letterboxFor(w, h, 512, 512))).toEqual({ width: w, height: h });
      expect(sourceSize(letterboxFor(w, h, 416, 320))).toEqual({ width: w, height: h });
    }
  });

  it('maps boxes there and back', () => {
    const lb = letterboxFor(1280, 720, 512, 512);
    const box = { x1: 12.5, y1: 40, x2: 640, y2: 719 };
    const inModel = boxToInput(box, lb);
    expect(inModel.y1).toBeCloseTo(40 * 0.4 + 112, 10);
    expectBoxClose(boxToSource(inModel, lb), box, 1e-9);
    expect(clipBox({ x1: -5, y1: -1, x2: 1300, y2: 800 }, 1280, 720)).toEqual({ x1: 0, y1: 0, x2: 1280, y2: 720 });
  });
});

describe('preprocessCenternet', () => {
  it('letterboxes a batch into float32 NHWC 0..255 with black padding', () => {
    const { input, letterboxes } = preprocessCenternet([solid(768, 432, [200, 100, 50]), solid(100, 400, [10, 20, 30])], 512);
    expect(input.type).toBe('float32');
    expect(input.dims).toEqual([2, 512, 512, 3]);
    const x = f32(input);
    const px = (n: number, y: number, xx: number): number[] => Array.from(x.subarray(((n * 512 + y) * 512 + xx) * 3, ((n * 512 + y) * 512 + xx) * 3 + 3));
    // Image 0: rows 0..111 and 400..511 are padding, 112..399 content.
    expect(px(0, 111, 256)).toEqual([0, 0, 0]);
    expect(px(0, 400, 0)).toEqual([0, 0, 0]);
    for (const [y, xx] of [[112, 0], [399, 511], [256, 256]] as const) {
      const [r, g, b] = px(0, y, xx);
      expect(r).toBeCloseTo(200, 3);
      expect(g).toBeCloseTo(100, 3);
      expect(b).toBeCloseTo(50, 3);
    }
    // Image 1: 128 columns of content centred (192..319).
    expect(px(1, 10, 191)).toEqual([0, 0, 0]);
    expect(px(1, 10, 320)).toEqual([0, 0, 0]);
    expect(px(1, 10, 192)[2]).toBeCloseTo(30, 3);
    expect(px(1, 511, 319)[0]).toBeCloseTo(10, 3);
    expect(letterboxes[1]!.padX).toBeCloseTo(192, 10);
  });

  it('copies a 512x512 frame unchanged', () => {
    const img: RgbImage = { width: 512, height: 512, data: new Uint8Array(512 * 512 * 3) };
    for (let i = 0; i < img.data.length; i++) img.data[i] = (i * 7919) % 251;
    const { input } = preprocessCenternet([img]);
    const x = f32(input);
    let maxDiff = 0;
    for (let i = 0; i < x.length; i++) maxDiff = Math.max(maxDiff, Math.abs(x[i]! - img.data[i]!));
    expect(x.length).toBe(img.data.length);
    expect(maxDiff).toBe(0);
  });

  it('averages when shrinking (no aliasing) and interpolates when enlarging', () => {
    // 1024x1024 checkerboard of 1-pixel black/white squares -> flat grey at 512.
    const big: RgbImage = { width: 1024, height: 1024, data: new Uint8Array(1024 * 1024 * 3) };
    for (let y = 0; y < 1024; y++) for (let x = 0; x < 1024; x++) big.data.fill((x + y) % 2 ? 255 : 0, (y * 1024 + x) * 3, (y * 1024 + x) * 3 + 3);
    const shrunk = f32(preprocessCenternet([big]).input);
    for (const [y, x] of [[1, 1], [100, 300], [255, 256], [510, 510]] as const) expect(shrunk[(y * 512 + x) * 3]).toBeCloseTo(127.5, 3);
    // Edge pixels renormalise over the taps inside the image: still grey, not black or white.
    for (const i of [0, shrunk.length - 1]) expect(Math.abs(shrunk[i]! - 127.5)).toBeLessThan(5);
    // 2x1 image black|white enlarged 256x: monotone ramp across the middle.
    const tiny: RgbImage = { width: 2, height: 1, data: new Uint8Array([0, 0, 0, 255, 255, 255]) };
    const { input, letterboxes } = preprocessCenternet([tiny]);
    expect(letterboxes[0]!.scale).toBe(256);
    const row = 256; // inside the 256-row content band (128..383)
    const v = (xx: number): number => f32(input)[(row * 512 + xx) * 3]!;
    expect(v(0)).toBe(0);
    expect(v(511)).toBe(255);
    expect(v(255)).toBeLessThan(v(256));
    expect(v(256) + v(255)).toBeCloseTo(255, 3);
    expect(f32(input)[(100 * 512 + 256) * 3]).toBe(0); // padding row
  });

  it('rejects a buffer that does not match the size', () => {
    expect(() => preprocessCenternet([{ width: 10, height: 10, data: new Uint8Array(299) }])).toThrow(/not 10x10 RGB/);
  });

  it('in libvips, gives a batch of one or more in memory the model thread can take over, not a copy on every run', async () => {
    for (const count of [1, 2]) {
      const { input } = await letterboxBatchNative(Array.from({ length: count }, () => solid(40, 20, [200, 100, 50])), 32, 'test');
      expect(input.data[32 * 8 * 3]).toBe(200); // the first pixel of the image's top row, red
      const { port1 } = new MessageChannel();
      port1.postMessage(input.data, [input.data.buffer as ArrayBuffer]);
      port1.close();
      expect(input.data.buffer.byteLength).toBe(0); // detached: moved, not cloned
    }
  });
});

describe('decodeCenternet', () => {
  function detections(rows: number[][][]): TensorData {
    const k = 100;
    const data = new Float32Array(rows.length * k * 6);
    rows.forEach((img, n) => img.forEach((r, i) => data.set(r, (n * k + i) * 6)));
    return { data, dims: [rows.length, k, 6], type: 'float32' };
  }

  it('filters by score, maps back through the letterbox, clips, runs class-wise NMS', () => {
    const lbs: Letterbox[] = [letterboxFor(768, 432, 512, 512), letterboxFor(512, 512, 512, 512)];
    const out = decodeCenternet(
      {
        detections: detections([
          [
            [100, 112, 200, 212, 0.9, 2], // car -> (150, 0, 300, 150)
            [102, 112, 202, 212, 0.8, 2], // same car again: suppressed
            [100, 112, 200, 212, 0.7, 7], // truck on it: other class, kept
            [-20, 380, 40, 420, 0.6, 0], // person hanging off the bottom-left: clipped
            [0, 0, 50, 50, 0.6, 0], // entirely in the top padding: dropped
            [10, 200, 20, 210, 0.2, 0], // below minScore
          ],
          [[10, 10, 20, 20, 0.5, 79]],
        ]),
      },
      lbs,
      { minScore: 0.3, maxDetections: 10, iouThreshold: 0.5 },
    );
    expect(out).toHaveLength(2);
    const [first, second] = out;
    expect(first!.map((d) => [d.className, d.score])).toEqual([
      ['car', expect.closeTo(0.9, 5)],
      ['truck', expect.closeTo(0.7, 5)],
      ['person', expect.closeTo(0.6, 5)],
    ]);
    expectBoxClose(first![0]!.box, { x1: 150, y1: 0, x2: 300, y2: 150 }, 1e-3);
    expectBoxClose(first![2]!.box, { x1: 0, y1: 402, x2: 60, y2: 432 }, 1e-3);
    expect(second).toEqual([{ box: { x1: 10, y1: 10, x2: 20, y2: 20 }, classId: 79, className: 'toothbrush', score: 0.5 }]);

    const agnostic = decodeCenternet({ detections: detections([[[0, 0, 10, 10, 0.9, 2], [0, 0, 10, 10, 0.8, 7]]]) }, [lbs[1]!], {
      minScore: 0.3,
      maxDetections: 10,
      iouThreshold: 0.5,
      classAgnostic: true,
    });
    expect(agnostic[0]!.map((d) => d.className)).toEqual(['car']);
    const capped = decodeCenternet({ detections: detections([[[0, 0, 10, 10, 0.9, 2], [20, 20, 30, 30, 0.8, 7]]]) }, [lbs[1]!], {
      minScore: 0,
      maxDetections: 1,
      iouThreshold: 0.5,
    });
    expect(capped[0]).toHaveLength(1);
  });

  it('rejects outputs that do not match the batch', () => {
    const t = detections([[[0, 0, 1, 1, 1, 0]]]);
    expect(() => decodeCenternet({ detections: t }, [], { minScore: 0, maxDetections: 1, iouThreshold: 0.5 })).toThrow(/expected float32 detections/);
    expect(() => decodeCenternet({}, [], { minScore: 0, maxDetections: 1, iouThreshold: 0.5 })).toThrow(/no "detections" output/);
  });
});

/**
 * Golden test: the committed ONNX model through preprocess/decode on committed frames from the
 * shared footage (car-detection.mp4 at 16 s and 11 s, one-by-one-person-detection.mp4 at 30 s).
 * Boxes were recorded from a first run and checked by eye against the frames. Note what this model
 * makes of cars seen from above: the fully visible silver car is a `cell phone` (0.74), the red car
 * cut by the frame edge scores 0.14 as `car`. Person frames are in distribution.
 */
describe('CenterNet ONNX golden', () => {
  let session: ort.InferenceSession;
  const images: Record<string, RgbImage> = {};
  const names = ['road-two-cars', 'road-empty', 'room-person'] as const;

  async function load(name: string): Promise<RgbImage> {
    const { data, info } = await sharp(readFileSync(`${FIXTURES}${name}.jpg`)).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.length) };
  }

  async function detect(batch: RgbImage[], minScore: number, inputSize: number = CENTERNET.inputSize): Promise<Detection[][]> {
    const { input, letterboxes } = preprocessCenternet(batch, inputSize);
    const out = await session.run({ [CENTERNET.inputName]: new ort.Tensor('float32', f32(input), input.dims) });
    const t = out[CENTERNET.outputName]!;
    return decodeCenternet({ [CENTERNET.outputName]: { data: t.data as Float32Array, dims: [...t.dims], type: 'float32' } }, letterboxes, {
      minScore,
      maxDetections: 100,
      iouThreshold: 0.5,
    });
  }

  beforeAll(async () => {
    session = await ort.InferenceSession.create(MODEL);
    for (const n of names) images[n] = await load(n);
  });

  it('has the documented input and output', () => {
    expect(session.inputNames).toEqual(['images']);
    expect(session.outputNames).toEqual(['detections']);
  });

  it('finds the expected objects at min score 0.3', async () => {
    const [cars, empty, person] = await detect(names.map((n) => images[n]!), 0.3);

    expect(cars).toHaveLength(1);
    expect(cars![0]!.className).toBe('cell phone');
    expect(cars![0]!.score).toBeCloseTo(0.743, 2);
    expect(iou(cars![0]!.box, { x1: 109.0, y1: 0.0, x2: 259.4, y2: 264.8 })).toBeGreaterThan(0.9);

    expect(empty).toEqual([]);

    const persons = person!.filter((d) => d.className === 'person');
    expect(persons).toHaveLength(1);
    expect(persons[0]!.score).toBeCloseTo(0.746, 2);
    expect(iou(persons[0]!.box, { x1: 380.0, y1: 4.2, x2: 541.2, y2: 378.4 })).toBeGreaterThan(0.9);
    expect(person![0]).toBe(persons[0]);
  });

  it('sees the half-visible red car as a low-score car', async () => {
    const [cars] = await detect([images['road-two-cars']!], 0.1);
    const car = cars!.find((d) => d.className === 'car');
    expect(car).toBeDefined();
    expect(car!.score).toBeGreaterThan(0.1);
    expect(car!.score).toBeLessThan(0.2);
    expect(iou(car!.box, { x1: 317.5, y1: 212.7, x2: 496.7, y2: 427.5 })).toBeGreaterThan(0.9);
  });

  it('runs at the zoo variants\' smaller inputs (384, 256), finding the same person, and nothing on the empty road', async () => {
    for (const size of [384, 256]) {
      const [person, empty] = await detect([images['room-person']!, images['road-empty']!], 0.3, size);
      const persons = person!.filter((d) => d.className === 'person');
      expect(persons, `at ${size}`).toHaveLength(1);
      expect(iou(persons[0]!.box, { x1: 380.0, y1: 4.2, x2: 541.2, y2: 378.4 }), `at ${size}`).toBeGreaterThan(0.8);
      expect(empty, `at ${size}`).toEqual([]);
    }
  });

  it('gives the same detections at batch 1 and batch 4', async () => {
    const batch = [images['room-person']!, images['road-two-cars']!, images['road-empty']!, images['room-person']!];
    const together = await detect(batch, 0.1);
    for (let i = 0; i < batch.length; i++) {
      const [alone] = await detect([batch[i]!], 0.1);
      expect(together[i]!.map((d) => [d.className, d.score.toFixed(4)])).toEqual(alone!.map((d) => [d.className, d.score.toFixed(4)]));
      together[i]!.forEach((d, k) => expectBoxClose(d.box, alone![k]!.box, 1e-3));
    }
  });
});

describe('a CenterNet file that takes one size only', () => {
  it('BAD INPUT: refuses, when it loads, a zoo entry asking for another size, naming the file and the fix', async () => {
    const model = decodeOnnxModel(readFileSync(MODEL));
    const input = model.graph!.input!.find((i) => i.name === 'images')!;
    for (const axis of [1, 2]) input.type!.tensorType!.shape!.dim![axis] = { dimValue: 512 };
    const dir = mkdtempSync(join(tmpdir(), 'panoptes-centernet-512-'));
    const runtime = createOnnxRuntime({ logger: silentLogger() });
    try {
      const file = join(dir, 'centernet-512-only.onnx');
      writeFileSync(file, encodeOnnxModel(model));
      const spec = { ...loadModelZoo()['centernet-384']!, file };
      await expect(loadModelRunner(spec, runtime)).rejects.toThrow(/centernet-512-only\.onnx takes 512 px only, not inputSize 384; convert it again with tools\/convert-models/);
      // At the size it takes it loads as before.
      await (await loadModelRunner({ ...spec, inputSize: 512 }, runtime)).dispose();
    } finally {
      await runtime.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
