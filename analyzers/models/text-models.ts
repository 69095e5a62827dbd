import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ErrorCode, PanoptesError, type ResolvedModel } from '../../core/index.js';
import { pixelsOf } from '../image/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { createOcrSteps, loadCharset } from './ocr/index.js';
import { parseWith, phasedRunner, type ModelRunner } from './runner.js';

export const detParams = z.strictObject({
  /** DB box threshold: mean text probability inside a box (PaddleOCR's det_db_box_thresh). */
  minScore: z.number().min(0).max(1).default(0.6),
  /** How far boxes grow around the text (det_db_unclip_ratio). */
  unclipRatio: z.number().positive().default(1.5),
  /** Longest image side fed to the detector, pixels (det_limit_side_len). */
  limitSideLen: z.number().int().positive().default(960),
});

/**
 * PP-OCRv4 text detection: one image per run (inputs differ in size). Each text region is a
 * detection of class `text`, so edges can filter and crop it like any other.
 */
export async function loadTextDetector(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner<z.infer<typeof detParams>>> {
  const model = await runtime.load({ name: spec.name, file: spec.file });
  const steps = createOcrSteps(spec.name);
  return phasedRunner({
    spec,
    parseParams: (params) => parseWith(detParams, spec, params),
    prepare: async (images, params) => {
      const prepared = await Promise.all(images.map(async (image, i) => steps.preprocessDet(await pixelsOf(image), { limitSideLen: params[i]!.limitSideLen })));
      return { size: images.length, inputs: prepared.map((p, i) => ({ prepared: p, params: params[i]! })) };
    },
    async execute({ size, inputs }) {
      // One run per image: their sizes differ, so they do not stack.
      const maps = [];
      for (const { prepared } of inputs) {
        const result = await model.run({ [model.inputNames[0] ?? 'x']: prepared.input });
        const probMap = result[model.outputNames[0] ?? ''];
        if (!probMap) throw new PanoptesError(ErrorCode.ModelRun, `${spec.name} returned no output`);
        maps.push(probMap);
      }
      return { size, inputs, maps };
    },
    finish: async ({ inputs, maps }) =>
      Promise.all(
        inputs.map(async ({ prepared: { scaleX, scaleY, width, height }, params }, i) => {
          const boxes = await steps.decodeDet(maps[i]!, { scaleX, scaleY, width, height }, { boxThreshold: params.minScore, unclipRatio: params.unclipRatio });
          return {
            kind: 'detections' as const,
            detections: boxes.map((b) => ({ box: b.box, classId: 0, className: 'text', score: b.score })),
          };
        }),
      ),
    dispose: async () => {
      await steps.close();
      await model.dispose();
    },
  });
}

export const recParams = z.strictObject({
  /** Lines read with a lower mean confidence are left out (PaddleOCR's drop_score). */
  minScore: z.number().min(0).max(1).default(0.5),
});

/** PP-OCRv4 text recognition: each image is one line of text; the output is its text. */
export async function loadTextRecognizer(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner<z.infer<typeof recParams>>> {
  if (!spec.charset) {
    throw new PanoptesError(ErrorCode.ModelLoad, `model ${spec.name}: a text recognizer needs \`charset\` in the model zoo`, { details: { model: spec.name } });
  }
  const charsetFile = spec.charset;
  // Read here too, so that a missing or malformed charset fails the load rather than every batch.
  loadCharset(readFileSync(charsetFile, 'utf8'));
  const model = await runtime.load({ name: spec.name, file: spec.file });
  const steps = createOcrSteps(spec.name);
  return phasedRunner({
    spec,
    parseParams: (params) => parseWith(recParams, spec, params),
    prepare: async (images, params) => ({ size: images.length, input: await steps.preprocessRec(await Promise.all(images.map(pixelsOf))), sizes: images.map((i) => ({ width: i.width, height: i.height })), params }),
    async execute({ size, input, sizes, params }) {
      const result = await model.run({ [model.inputNames[0] ?? 'x']: input });
      const logits = result[model.outputNames[0] ?? ''];
      if (!logits) throw new PanoptesError(ErrorCode.ModelRun, `${spec.name} returned no output`);
      return { size, logits, sizes, params };
    },
    finish: async ({ logits, sizes, params }) =>
      (await steps.ctcDecode(logits, charsetFile)).map((line, i) => {
        const { width, height } = sizes[i]!;
        const keep = line.text.trim() !== '' && line.score >= params[i]!.minScore;
        return {
          kind: 'texts' as const,
          texts: keep ? [{ text: line.text, score: line.score, box: { x1: 0, y1: 0, x2: width, y2: height } }] : [],
        };
      }),
    dispose: async () => {
      await steps.close();
      await model.dispose();
    },
  });
}
