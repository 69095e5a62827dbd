import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime, decodeJpeg, loadModelRunner, type ModelRunner, type RgbImage } from '../../analyzers/index.js';
import { BLAZEFACE, decodeFaceres, decodeFaces, FACERES } from '../../analyzers/models/face/index.js';
import { cropImage } from '../../analyzers/models/index.js';
import type { Attribute, Box, Detection } from '../../analyzers/models/types.js';
import { ErrorCode, loadModelZoo, projectRoot, silentLogger, type NodeOutput } from '../../core/index.js';
import { resolveFfmpegPath } from '../../ingest/index.js';
import { solid } from '../helpers.js';

/**
 * BlazeFace and FaceRes from the zoo (models/blazeface.onnx, models/faceres.onnx) on real frames:
 * three stills of face-demographics-walking.gif committed as fixtures (frames 1, 18 and 35; sample
 * videos by Intel Corporation, intel-iot-devkit/sample-videos, CC BY 4.0), all 35 frames of the GIF
 * when the shared footage is there, and pictures without faces.
 */
const root = projectRoot();
const FIXTURES = join(root, 'test/fixtures/images');
const FOOTAGE = fileURLToPath(new URL('../../../shared/footage/face-demographics-walking.gif', import.meta.url));
const hasFootage = existsSync(FOOTAGE);

const still = async (name: string): Promise<RgbImage> => decodeJpeg(readFileSync(join(FIXTURES, name)));

const detections = (out: NodeOutput | undefined): Detection[] => {
  if (out?.kind !== 'detections') throw new Error(`expected detections, got ${out?.kind}`);
  return out.detections;
};
const attributes = (out: NodeOutput | undefined): Record<string, Attribute> => {
  if (out?.kind !== 'attributes') throw new Error(`expected attributes, got ${out?.kind}`);
  return Object.fromEntries(out.attributes.map((a) => [a.name, a]));
};

/** The face box grown by 20 % of its size on each side: the crop FaceRes is fed (an edge cropPadding of 0.2). */
function faceCrop(image: RgbImage, box: Box): RgbImage {
  const padX = 0.2 * (box.x2 - box.x1);
  const padY = 0.2 * (box.y2 - box.y1);
  return cropImage(image, { x1: box.x1 - padX, y1: box.y1 - padY, x2: box.x2 + padX, y2: box.y2 + padY });
}

/** Left to right: in the GIF the woman walks on the left, the man on the right. */
const byX = (faces: Detection[]): Detection[] => [...faces].sort((a, b) => a.box.x1 - b.box.x1);

describe('face models from the zoo', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const zoo = loadModelZoo();
  let detector: ModelRunner;
  let faceres: ModelRunner;
  /** Frames 1, 18 and 35, in that order. */
  const stills: RgbImage[] = [];

  beforeAll(async () => {
    detector = await loadModelRunner(zoo.blazeface!, runtime);
    faceres = await loadModelRunner(zoo.faceres!, runtime);
    for (const n of ['01', '18', '35']) stills.push(await still(`face-walking-${n}.jpg`));
  });
  afterAll(async () => {
    await detector.dispose();
    await faceres.dispose();
    await runtime.close();
  });

  it('loads both through loadModelRunner, with their tasks and checked params', () => {
    expect(zoo.blazeface).toMatchObject({ task: 'detect-objects', architecture: 'blazeface', inputSize: 256 });
    expect(zoo.faceres).toMatchObject({ task: 'recognize-attributes', architecture: 'faceres' });
    expect(detector.spec.name).toBe('blazeface');
    expect(faceres.spec.name).toBe('faceres');
    expect(detector.parseParams({})).toEqual({ minScore: 0.5, iouThreshold: 0.1, maxDetections: 100 });
    expect(faceres.parseParams({})).toEqual({ maleThreshold: 0.6 });
    expect(() => detector.parseParams({ minScore: 1.5 })).toThrow(expect.objectContaining({ code: ErrorCode.AppInvalid }));
    expect(() => detector.parseParams({ minScroe: 0.5 })).toThrow(/minScroe/);
    expect(() => faceres.parseParams({ maleThreshold: 1 })).toThrow(/maleThreshold/);
  });

  it('blazeface refuses another input size (its anchors are fixed)', async () => {
    await expect(loadModelRunner({ ...zoo.blazeface!, inputSize: 128 }, runtime)).rejects.toMatchObject({ code: ErrorCode.ModelLoad, message: expect.stringContaining('256') });
  });

  /**
   * Whole 480x270 frames: the faces are 12..26 px, and the woman's in frame 1 scores 0.40 (0.42 in the
   * GIF itself, before JPEG); see BLAZEFACE_DEFAULT_MIN_SCORE.
   */
  const wholeFrame = { minScore: 0.35 };

  it('blazeface finds the two faces on stills of face-demographics-walking.gif', async () => {
    const outs = await detector.run(stills, stills.map(() => detector.parseParams(wholeFrame)));
    for (const [i, out] of outs.entries()) {
      const faces = byX(detections(out));
      expect(faces, `still ${i}`).toHaveLength(2);
      for (const f of faces) {
        expect(f).toMatchObject({ classId: 0, className: 'face' });
        expect(f.score).toBeGreaterThanOrEqual(0.35);
        expect(f.score).toBeLessThanOrEqual(1);
        const w = f.box.x2 - f.box.x1;
        const h = f.box.y2 - f.box.y1;
        // Faces here are 15..30 px, near square, in the upper half of the 480x270 frame.
        expect(w).toBeGreaterThan(12);
        expect(w).toBeLessThan(40);
        expect(h / w).toBeGreaterThan(0.7);
        expect(h / w).toBeLessThan(1.4);
        expect(f.box.y2).toBeLessThan(170);
      }
      // Woman on the left (x 170..290), man on the right (x 280..330).
      expect(faces[0]!.box.x1).toBeGreaterThan(160);
      expect(faces[1]!.box.x1).toBeGreaterThan(270);
    }
    // Recorded boxes of the last still (frame 35), checked by eye: the woman's face and the man's.
    const last = byX(detections(outs[2]));
    const expected = [
      { x1: 168, y1: 127, x2: 194, y2: 153 },
      { x1: 291, y1: 98, x2: 317, y2: 124 },
    ];
    last.forEach((f, i) => {
      for (const k of ['x1', 'y1', 'x2', 'y2'] as const) expect(Math.abs(f.box[k] - expected[i]![k])).toBeLessThan(2);
    });
  });

  it('blazeface finds one face per person on person crops, as the billboard app feeds it', async () => {
    const people = await loadModelRunner(zoo.centernet!, runtime);
    try {
      const images = stills;
      const found = await people.run(images, images.map(() => people.parseParams({ minScore: 0.4, classes: ['person'] })));
      const crops = found.flatMap((out, i) =>
        detections(out).map((d) => {
          const padX = 0.05 * (d.box.x2 - d.box.x1);
          const padY = 0.05 * (d.box.y2 - d.box.y1);
          return cropImage(images[i]!, { x1: d.box.x1 - padX, y1: d.box.y1 - padY, x2: d.box.x2 + padX, y2: d.box.y2 + padY });
        }),
      );
      expect(crops).toHaveLength(6);
      const faces = await detector.run(crops, crops.map(() => detector.parseParams({ maxDetections: 1 })));
      for (const [k, out] of faces.entries()) {
        const [face] = detections(out);
        expect(face, `person ${k}`).toBeDefined();
        expect(face!.score).toBeGreaterThanOrEqual(0.5);
        // The face is in the top of a standing person's box.
        expect(face!.box.y2).toBeLessThan(crops[k]!.height / 3);
      }
    } finally {
      await people.dispose();
    }
  });

  it('blazeface finds no face where there is none', async () => {
    // A synthetic picture: grey background, a dark rectangle and a bright disc.
    const synthetic = solid(480, 270, [128, 128, 128]);
    for (let y = 0; y < 270; y++) {
      for (let x = 0; x < 480; x++) {
        const o = (y * 480 + x) * 3;
        if (x > 40 && x < 160 && y > 60 && y < 200) synthetic.data.set([30, 40, 60], o);
        if ((x - 330) ** 2 + (y - 130) ** 2 < 50 ** 2) synthetic.data.set([230, 220, 200], o);
      }
    }
    const images = [synthetic, solid(320, 240, [0, 0, 0]), await still('road-empty.jpg'), await still('road-two-cars.jpg')];
    const outs = await detector.run(images, images.map(() => detector.parseParams(wholeFrame)));
    for (const out of outs) expect(detections(out)).toEqual([]);
  });

  it('faceres reads an adult age and a gender with a score for each face found', async () => {
    const images = stills;
    const found = await detector.run(images, images.map(() => detector.parseParams(wholeFrame)));
    const crops = found.flatMap((out, i) => byX(detections(out)).map((d) => faceCrop(images[i]!, d.box)));
    expect(crops).toHaveLength(6);
    const outs = await faceres.run(crops, crops.map(() => faceres.parseParams({})));
    for (const out of outs) {
      expect(out.kind).toBe('attributes');
      const { age, gender } = attributes(out);
      expect(age!.number).toBeGreaterThanOrEqual(20);
      expect(age!.number).toBeLessThanOrEqual(60);
      expect(age!.value).toBe(String(Math.round(age!.number)));
      expect(age!.score).toBeGreaterThan(0);
      expect(age!.score).toBeLessThanOrEqual(1);
      expect(['female', 'male']).toContain(gender!.value);
      expect(gender!.number).toBe(0);
      expect(gender!.score).toBeGreaterThanOrEqual(0);
      expect(gender!.score).toBeLessThanOrEqual(1);
    }
  });

  it('batch of N equals N runs of batch 1, for both models', async () => {
    const images = stills;
    const params = images.map(() => detector.parseParams({ minScore: 0.3 }));
    const batched = await detector.run(images, params);
    const single: NodeOutput[] = [];
    for (const [i, image] of images.entries()) single.push(...(await detector.run([image], [params[i]!])));
    expect(batched).toHaveLength(3);
    batched.forEach((out, i) => {
      const a = detections(out);
      const b = detections(single[i]);
      expect(a.length).toBe(b.length);
      a.forEach((d, k) => {
        expect(d.score).toBeCloseTo(b[k]!.score, 5);
        for (const key of ['x1', 'y1', 'x2', 'y2'] as const) expect(d.box[key]).toBeCloseTo(b[k]!.box[key], 3);
      });
    });

    const crops = batched.flatMap((out, i) => detections(out).map((d) => faceCrop(images[i]!, d.box)));
    const fParams = crops.map(() => faceres.parseParams({}));
    const fBatched = await faceres.run(crops, fParams);
    for (const [i, crop] of crops.entries()) {
      const [one] = await faceres.run([crop], [fParams[i]!]);
      const a = attributes(fBatched[i]);
      const b = attributes(one);
      expect(a.age!.number).toBeCloseTo(b.age!.number, 3);
      expect(a.age!.score).toBeCloseTo(b.age!.score, 4);
      expect(a.gender!.value).toBe(b.gender!.value);
      expect(a.gender!.score).toBeCloseTo(b.gender!.score, 4);
    }
  });

  const footageName = hasFootage
    ? 'every frame of face-demographics-walking.gif: two faces each, ages adult, genders mostly right'
    : `SKIPPED: ${FOOTAGE} not found (shared footage absent) — would run both models on the 35 frames of face-demographics-walking.gif`;
  it.skipIf(!hasFootage)(footageName, async () => {
    const [w, h] = [480, 270];
    const raw = execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-i', FOOTAGE, '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'], {
      maxBuffer: 64 * 1024 * 1024,
    });
    const frames: RgbImage[] = [];
    for (let o = 0; o + w * h * 3 <= raw.length; o += w * h * 3) frames.push({ width: w, height: h, data: new Uint8Array(raw.subarray(o, o + w * h * 3)) });
    expect(frames).toHaveLength(35);

    const found = await detector.run(frames, frames.map(() => detector.parseParams(wholeFrame)));
    const scores: number[] = [];
    const crops: RgbImage[] = [];
    for (const [i, out] of found.entries()) {
      const faces = byX(detections(out));
      expect(faces, `frame ${i + 1}`).toHaveLength(2);
      scores.push(...faces.map((f) => f.score));
      crops.push(...faces.map((f) => faceCrop(frames[i]!, f.box)));
    }
    expect(Math.min(...scores)).toBeGreaterThan(0.4);

    const read = await faceres.run(crops, crops.map(() => faceres.parseParams({})));
    const genders = { woman: [] as string[], man: [] as string[] };
    for (const [k, out] of read.entries()) {
      const { age, gender } = attributes(out);
      expect(age!.number).toBeGreaterThanOrEqual(20);
      expect(age!.number).toBeLessThanOrEqual(60);
      (k % 2 === 0 ? genders.woman : genders.man).push(gender!.value);
    }
    // 10..30 px faces from a dithered GIF: the model is unsure, but right on most frames.
    const share = (list: string[], value: string): number => list.filter((g) => g === value).length / list.length;
    expect(share(genders.woman, 'female')).toBeGreaterThan(0.6);
    expect(share(genders.man, 'male')).toBeGreaterThan(0.6);
  });
});

describe('face decoders', () => {
  it('blazeface: maps rows back through the letterbox, filters, suppresses', () => {
    // One 512x288 image letterboxed into 256: scale 0.5, 56 px bars above and below.
    const lb = { scale: 0.5, padX: 0, padY: 56, inputWidth: 256, inputHeight: 256 };
    const rows = new Float32Array(BLAZEFACE.anchors * 5);
    rows.set([100, 100, 120, 120, 0.9], 0); // a face
    rows.set([101, 101, 121, 121, 0.8], 5); // the same face again
    rows.set([10, 60, 30, 80, 0.4], 10); // under minScore
    rows.set([200, 0, 220, 20, 0.7], 15); // wholly in the padding bar: clipped to nothing
    const out = decodeFaces({ faces: { data: rows, dims: [1, BLAZEFACE.anchors, 5], type: 'float32' } }, [lb], { minScore: 0.5, iouThreshold: 0.2, maxDetections: 10 });
    expect(out).toEqual([[{ box: { x1: 200, y1: 88, x2: 240, y2: 128 }, classId: 0, className: 'face', score: expect.closeTo(0.9, 6) }]]);
    expect(() => decodeFaces({}, [lb], { minScore: 0.5, iouThreshold: 0.2, maxDetections: 10 })).toThrow(/expected float32 faces/);
  });

  it('faceres: age is the expected value (bin i = age i + 1), gender splits at the threshold', () => {
    const age = new Float32Array(2 * FACERES.ageBins);
    age[29] = 0.5; // age 30
    age[39] = 0.5; // age 40
    age[FACERES.ageBins + 59] = 1; // age 60
    const gender = new Float32Array([0.3, 0.8]);
    const [a, b] = decodeFaceres(
      { gender: { data: gender, dims: [2, 1], type: 'float32' }, age: { data: age, dims: [2, FACERES.ageBins], type: 'float32' } },
      2,
      [{ maleThreshold: 0.6 }, { maleThreshold: 0.6 }],
    );
    expect(a).toEqual([
      { name: 'age', value: '35', number: 35, score: expect.closeTo(1, 6) },
      { name: 'gender', value: 'female', number: 0, score: expect.closeTo(0.5, 6) },
    ]);
    expect(b).toEqual([
      { name: 'age', value: '60', number: 60, score: expect.closeTo(1, 6) },
      { name: 'gender', value: 'male', number: 0, score: expect.closeTo(0.5, 6) },
    ]);
    expect(() => decodeFaceres({ gender: { data: gender, dims: [2, 1], type: 'float32' } }, 2, [])).toThrow(/expected float32 age/);
  });
});
