import { z } from 'zod';
import { ErrorCode, PanoptesError, type ResolvedModel } from '../../core/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { cocoLabels, decodeCenternet, letterboxBatchNative, nms } from './detector/index.js';
import { parseWith, phasedRunner, type ModelRunner } from './runner.js';

const detectorParams = z.strictObject({
  minScore: z.number().min(0).max(1).default(0.3),
  /** Per-class thresholds that override `minScore`, e.g. `{ person: 0.3 }`. */
  minScores: z.record(z.string(), z.number().min(0).max(1)).default({}),
  /**
   * Renames classes as they come out, before `classes` and `minScores` apply, e.g.
   * `{ cell phone: car }` for cars filmed from straight above, which COCO models never saw and
   * call cell phones.
   */
  relabel: z.record(z.string(), z.string().min(1)).default({}),
  classes: z.array(z.string()).optional(),
  maxDetections: z.number().int().positive().default(100),
  iouThreshold: z.number().min(0).max(1).default(0.5),
  /** One detection per object: among the wanted classes, overlapping boxes keep the best class only. */
  classAgnostic: z.boolean().default(true),
});
type DetectorParams = z.infer<typeof detectorParams>;

/** COCO object detection with CenterNet: letterbox, run, decode, then each node's own filter. */
export async function loadObjectDetector(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner<DetectorParams>> {
  const inputSize = spec.inputSize ?? 512;
  const model = await runtime.load({ name: spec.name, file: spec.file });
  return phasedRunner({
    spec,
    parseParams(params) {
      const parsed = parseWith(detectorParams, spec, params);
      const named = new Set([...cocoLabels, ...Object.values(parsed.relabel)]);
      const unknown = [
        ...Object.keys(parsed.relabel).filter((c) => !cocoLabels.includes(c)),
        ...[...(parsed.classes ?? []), ...Object.keys(parsed.minScores)].filter((c) => !named.has(c)),
      ];
      if (unknown.length > 0) {
        throw new PanoptesError(ErrorCode.AppInvalid, `params: unknown class ${unknown.map((c) => `"${c}"`).join(', ')} for ${spec.name}; expected ${spec.labels ?? 'coco'} names`);
      }
      return parsed;
    },
    async prepare(images, params) {
      const { input, letterboxes } = await letterboxBatchNative(images, inputSize, spec.name);
      return { size: images.length, input, letterboxes, params };
    },
    async execute(prepared) {
      const outputs = await model.run({ [model.inputNames[0] ?? 'images']: prepared.input });
      return { size: prepared.size, outputs, letterboxes: prepared.letterboxes, params: prepared.params };
    },
    finish({ outputs, letterboxes, params }) {
      // Decode once with the loosest settings of the batch, then apply each request's own.
      const perImage = decodeCenternet(outputs, letterboxes, {
        minScore: Math.min(...params.flatMap((p) => [p.minScore, ...Object.values(p.minScores)])),
        maxDetections: Math.max(...params.map((p) => p.maxDetections)),
        iouThreshold: Math.max(...params.map((p) => p.iouThreshold)),
      });
      return perImage.map((detections, i) => {
        const p = params[i]!;
        const wanted = p.classes ? new Set(p.classes) : undefined;
        const renamed = detections.map((d) => {
          const className = p.relabel[d.className];
          return className === undefined ? d : { ...d, className, classId: cocoLabels.includes(className) ? cocoLabels.indexOf(className) : d.classId };
        });
        const kept = renamed.filter((d) => d.score >= (p.minScores[d.className] ?? p.minScore) && (!wanted || wanted.has(d.className)));
        return {
          kind: 'detections' as const,
          detections: nms(kept, { iouThreshold: p.iouThreshold, maxDetections: p.maxDetections, classAgnostic: p.classAgnostic }),
        };
      });
    },
    dispose: () => model.dispose(),
  });
}
