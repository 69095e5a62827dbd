import { z } from 'zod';
import { ErrorCode, PanoptesError, type NodeOutput, type ResolvedModel } from '../../core/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { cocoLabels, decodeCenternet, nms, preprocessCenternet } from './detector/index.js';
import type { RgbImage } from './types.js';

/**
 * A model from the zoo, ready to run on decoded images: pre-processing, the runtime call and
 * post-processing behind one function. The architecture named in the manifest picks the code.
 */
export interface ModelRunner {
  readonly spec: ResolvedModel;
  /** Checks a node's `params` for this model; throws a message naming the bad key. */
  parseParams(params: Record<string, unknown>): RunParams;
  run(images: readonly RgbImage[], params: readonly RunParams[]): Promise<NodeOutput[]>;
  dispose(): Promise<void>;
}

export type RunParams = z.infer<typeof detectorParams>;

const detectorParams = z.strictObject({
  minScore: z.number().min(0).max(1).default(0.3),
  classes: z.array(z.string()).optional(),
  maxDetections: z.number().int().positive().default(100),
  iouThreshold: z.number().min(0).max(1).default(0.5),
  /** One detection per object: among the wanted classes, overlapping boxes keep the best class only. */
  classAgnostic: z.boolean().default(true),
});

export async function loadModelRunner(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner> {
  if (spec.task !== 'detect-objects' || spec.architecture !== 'centernet') {
    throw new PanoptesError(
      ErrorCode.ModelLoad,
      `model ${spec.name}: ${spec.task}/${spec.architecture} cannot run as a frame-level node yet (supported: detect-objects/centernet)`,
      { details: { model: spec.name } },
    );
  }
  const labels = cocoLabels;
  const inputSize = spec.inputSize ?? 512;
  const model = await runtime.load({ name: spec.name, file: spec.file });
  return {
    spec,
    parseParams(params) {
      const parsed = detectorParams.safeParse(params, { reportInput: true });
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new PanoptesError(ErrorCode.AppInvalid, `params.${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`);
      }
      const unknown = parsed.data.classes?.filter((c) => !labels.includes(c));
      if (unknown && unknown.length > 0) {
        throw new PanoptesError(ErrorCode.AppInvalid, `params.classes: unknown class ${unknown.map((c) => `"${c}"`).join(', ')} for ${spec.name}; expected ${spec.labels ?? 'coco'} names`);
      }
      return parsed.data;
    },
    async run(images, params) {
      const { input, letterboxes } = preprocessCenternet([...images], inputSize);
      const inputName = model.inputNames[0] ?? 'input';
      const outputs = await model.run({ [inputName]: input });
      const loosest = {
        minScore: Math.min(...params.map((p) => p.minScore)),
        maxDetections: Math.max(...params.map((p) => p.maxDetections)),
        iouThreshold: Math.max(...params.map((p) => p.iouThreshold)),
      };
      const perImage = decodeCenternet(outputs, letterboxes, loosest);
      return perImage.map((detections, i) => {
        const p = params[i] ?? detectorParams.parse({});
        const wanted = p.classes ? new Set(p.classes) : undefined;
        const kept = detections.filter((d) => d.score >= p.minScore && (!wanted || wanted.has(d.className)));
        return {
          kind: 'detections' as const,
          detections: nms(kept, { iouThreshold: p.iouThreshold, maxDetections: p.maxDetections, classAgnostic: p.classAgnostic }),
        };
      });
    },
    dispose: () => model.dispose(),
  };
}
