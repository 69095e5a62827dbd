import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { classifierCacheSchema, ErrorCode, PanoptesError, silentLogger, type Logger, type NodeOutput, type ResolvedModel } from '../../core/index.js';
import type { ImageInput } from '../image/index.js';
import { blockOutputs, readOnnxModel } from '../onnx/index.js';
import type { LoadedModel, ModelRuntime } from '../runtime/index.js';
import { letterboxBatchNative } from './detector/index.js';
import { createNodeCaches } from './node-caches.js';
import { float32Output, NO_INPUT, parseWith, phasedRunner, type ModelRunner } from './runner.js';

/**
 * Image classifiers (EfficientNet-Lite on ImageNet, `tools/convert-models/efficientnet_lite.py`):
 * input `images` float32 [N, S, S, 3], RGB 0..255, any S (the zoo's `inputSize`: a cheaper
 * template runs the same file at a smaller S); outputs `probabilities` [N, classes] and
 * `features` [N, F], the pooled layer a retrained top layer reads (handed on with each crop's
 * class, for a specialized node). Crops are letterboxed.
 */

export const classifierParams = z.strictObject({
  /** The node's `cache:` (a learned cache), which the DAG runner passes here. */
  cache: classifierCacheSchema.optional(),
});
type ClassifierParams = z.infer<typeof classifierParams>;

/**
 * The class of each crop: one `attributes` output per crop, `class` with its probability. Rows of
 * nodes with a `cache:` run through that node's learned caches (docs/learned-caches.md).
 */
export async function loadImageClassifier(spec: ResolvedModel, runtime: ModelRuntime, logger: Logger = silentLogger()): Promise<ModelRunner<ClassifierParams>> {
  const labels = classLabels(spec);
  const inputSize = classifierInputSize(spec);
  const model = await runtime.load({ name: spec.name, file: spec.file });
  const inputName = model.inputNames[0] ?? 'images';
  const caches = createNodeCaches<ClassifierParams>({
    spec,
    runtime,
    model,
    inputName,
    inputSize,
    candidateLayers: blockOutputs(await readOnnxModel(spec.file)),
    cacheOf: (p) =>
      p.cache && {
        config: p.cache,
        key: JSON.stringify(p.cache),
        probabilitiesOf: (outputs) => float32Output(outputs, 'probabilities', [outputs.probabilities?.dims[0] ?? 0, labels.length], spec.name),
      },
    logger,
  });

  return phasedRunner({
    spec,
    parseParams(params) {
      const parsed = parseWith(classifierParams, spec, params);
      const missing = caches.missingLayer(parsed.cache?.layers ?? []);
      if (missing) throw missing;
      return parsed;
    },
    prepare: async (images, params, streams) => ({ size: images.length, input: (await letterboxBatchNative(images, inputSize, spec.name)).input, params, streams }),
    execute: ({ input, params, streams }) => caches.execute(input, params, streams),
    finish: ({ size, outputs, plain, cached }) => {
      const results: NodeOutput[] = new Array(size);
      const rows = plain ?? Array.from({ length: size }, (_, i) => i);
      if (outputs) {
        const features = outputs.features ? float32Output(outputs, 'features', [rows.length, outputs.features.dims[1] ?? 0], spec.name) : undefined;
        const width = features ? features.length / rows.length : 0;
        topClasses(float32Output(outputs, 'probabilities', [rows.length, labels.length], spec.name), rows.length, labels).forEach(({ label, score }, i) => {
          results[rows[i]!] = {
            kind: 'attributes' as const,
            attributes: [{ name: 'class', value: label, number: 0, score }],
            ...(features ? { features: features.slice(i * width, (i + 1) * width) } : {}),
          };
        });
      }
      for (const [row, { answer, score, exit }] of cached ?? []) {
        results[row] = { kind: 'attributes' as const, attributes: [{ name: 'class', value: labels[answer] ?? `class${answer}`, number: 0, score }], exit };
      }
      return results;
    },
    cacheStats: () => caches.stats(),
    // In stages, a node's `cache:` does not apply: the deployment refuses the two together.
    stageable: {
      runtime,
      model: spec,
      feeds: ({ input }) => ({ [inputName]: input }),
      kept: (prepared) => ({ ...prepared, input: NO_INPUT }),
      executed: ({ size }, outputs) => ({ size, outputs, plain: undefined, cached: undefined }),
    },
    async dispose() {
      await caches.close();
      await model.dispose();
    },
  });
}

/** A classifier's feature layer: what the thesis' templates pre-forward and retrain a top layer on. */
export interface FeatureExtractor {
  readonly featureCount: number;
  /** Row-major [images, featureCount]. */
  features(images: readonly ImageInput[]): Promise<Float32Array>;
  dispose(): Promise<void>;
}

export async function loadFeatureExtractor(spec: ResolvedModel, runtime: ModelRuntime): Promise<FeatureExtractor> {
  const inputSize = classifierInputSize(spec);
  const model: LoadedModel = await runtime.load({ name: spec.name, file: spec.file });
  let featureCount = 0;
  return {
    get featureCount() {
      return featureCount;
    },
    async features(images) {
      const { input } = await letterboxBatchNative(images, inputSize, spec.name);
      const outputs = await model.run({ [model.inputNames[0] ?? 'images']: input });
      const t = outputs.features;
      if (!t || t.dims.length !== 2 || t.dims[0] !== images.length || !(t.data instanceof Float32Array)) {
        throw new PanoptesError(ErrorCode.ModelRun, `${spec.name}: expected float32 features [${images.length}, F]`, { details: { model: spec.name } });
      }
      featureCount = t.dims[1]!;
      return t.data;
    },
    dispose: () => model.dispose(),
  };
}

/** Top-1 label and probability of each row. */
export function topClasses(probabilities: Float32Array, rows: number, labels: readonly string[]): { index: number; label: string; score: number }[] {
  const classes = probabilities.length / rows;
  return Array.from({ length: rows }, (_, i) => {
    let best = 0;
    for (let c = 1; c < classes; c++) if (probabilities[i * classes + c]! > probabilities[i * classes + best]!) best = c;
    return { index: best, label: labels[best] ?? `class${best}`, score: probabilities[i * classes + best]! };
  });
}

const labelCache = new Map<string, readonly string[]>();

/**
 * The zoo's `labelsFile`, one class per line; a class is named by the first of its comma-separated
 * names, or by the whole line where two classes share it (ImageNet's two `crane`s and `maillot`s).
 */
export function classLabels(spec: ResolvedModel): readonly string[] {
  const file = spec.labelsFile;
  if (!file) throw new PanoptesError(ErrorCode.ModelLoad, `model ${spec.name}: a classifier needs \`labelsFile\` in the model zoo`, { details: { model: spec.name } });
  let labels = labelCache.get(file);
  if (!labels) {
    const lines = readFileSync(file, 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '');
    const first = lines.map((line) => line.split(',')[0]!.trim());
    const shared = new Set(first.filter((name, i) => first.indexOf(name) !== i));
    labels = lines.map((line, i) => (shared.has(first[i]!) ? line : first[i]!));
    labelCache.set(file, labels);
  }
  return labels;
}

function classifierInputSize(spec: ResolvedModel): number {
  if (!spec.inputSize) throw new PanoptesError(ErrorCode.ModelLoad, `model ${spec.name}: a classifier needs \`inputSize\` in the model zoo`, { details: { model: spec.name } });
  return spec.inputSize;
}
