import { rm, writeFile } from 'node:fs/promises';
import type { LoadedModel, ModelRuntime } from '../runtime/index.js';
import { builtModel, encodeOnnxModel, floatInitializer, floatValueInfo, intAttribute, intsAttribute, type OnnxModel } from '../onnx/index.js';
import { denseInput, poolWindow, weightShapes, type HiddenShape, type VariantSpec } from './variant.js';

/**
 * A learned cache as one ONNX model, so that a lookup is one onnxruntime run: the predictor
 * reads `hidden` [batch, C, H, W] and gives `probabilities` [batch, classes]; the selector reads
 * those and gives `hit` [batch, 1], its belief that the predictor's top class is the base model's.
 */
export const LOOKUP_INPUT = 'hidden';
export const LOOKUP_PROBABILITIES = 'probabilities';
export const LOOKUP_HIT = 'hit';
export const LOOKUP_FEATURES = 'features';

/** Trained weights by name, in the layouts of `weightShapes`. */
export type CacheWeights = Record<string, Float32Array>;

export function lookupModel(spec: VariantSpec, shape: HiddenShape, classes: number, weights: CacheWeights): OnnxModel {
  const shapes = checkedShapes(spec, shape, classes, weights);
  const selector = [
    gemm(LOOKUP_FEATURES, 'out', 'logits'),
    { opType: 'Softmax', name: 'softmax', input: ['logits'], output: [LOOKUP_PROBABILITIES], attribute: [intAttribute('axis', 1)] },
    gemm(LOOKUP_PROBABILITIES, 'sel1', 'sel1/out'),
    relu('sel1/out', 'sel1/relu'),
    gemm('sel1/relu', 'sel2', 'sel2/out'),
    { opType: 'Sigmoid', name: 'sigmoid', input: ['sel2/out'], output: [LOOKUP_HIT] },
  ];
  return builtModel({
    name: 'learned_cache',
    node: [...frozenNodes(spec, shape), ...selector],
    initializer: Object.entries(shapes).map(([name, dims]) => floatInitializer(name, dims, weights[name]!)),
    input: [floatValueInfo(LOOKUP_INPUT, ['batch', shape.channels, shape.height, shape.width])],
    output: [floatValueInfo(LOOKUP_PROBABILITIES, ['batch', classes]), floatValueInfo(LOOKUP_HIT, ['batch', 1])],
  });
}

/**
 * The predictor's layers below its last dense one, which online retraining keeps as they are:
 * `hidden` in, `features` [batch, denseInput] out. Their output for a request never changes, so
 * it is computed once per request kept for retraining, not once per retraining.
 */
export function frozenModel(spec: VariantSpec, shape: HiddenShape, classes: number, weights: CacheWeights): OnnxModel {
  const shapes = checkedShapes(spec, shape, classes, weights);
  return builtModel({
    name: 'learned_cache_frozen',
    node: frozenNodes(spec, shape),
    initializer: Object.entries(shapes)
      .filter(([name]) => !name.startsWith('out/') && !name.startsWith('sel'))
      .map(([name, dims]) => floatInitializer(name, dims, weights[name]!)),
    input: [floatValueInfo(LOOKUP_INPUT, ['batch', shape.channels, shape.height, shape.width])],
    output: [floatValueInfo(LOOKUP_FEATURES, ['batch', denseInput(spec, shape)])],
  });
}

function checkedShapes(spec: VariantSpec, shape: HiddenShape, classes: number, weights: CacheWeights): Record<string, number[]> {
  const shapes = weightShapes(spec, shape, classes);
  for (const [name, dims] of Object.entries(shapes)) {
    const expected = dims.reduce((a, b) => a * b, 1);
    if (weights[name]?.length !== expected) throw new RangeError(`lookupModel: weight '${name}' has ${weights[name]?.length ?? 'no'} values, not ${expected} (${dims.join('×')})`);
  }
  return shapes;
}

const gemm = (input: string, layer: string, output: string) => ({ opType: 'Gemm', name: `${layer}/gemm`, input: [input, `${layer}/W`, `${layer}/b`], output: [output] });
const relu = (input: string, output: string) => ({ opType: 'Relu', name: `${output}/relu`, input: [input], output: [output] });
const flatten = (input: string, output: string) => ({ opType: 'Flatten', name: `${output}/flatten`, input: [input], output: [output], attribute: [intAttribute('axis', 1)] });

/** `hidden` to `features`, what the predictor's last dense layer reads. */
function frozenNodes(spec: VariantSpec, shape: HiddenShape) {
  switch (spec.family) {
    case 'FC':
      return [flatten(LOOKUP_INPUT, 'flat'), gemm('flat', 'fc', 'fc/out'), relu('fc/out', LOOKUP_FEATURES)];
    case 'Pool': {
      const window = poolWindow(spec, shape);
      const pool = { opType: 'AveragePool', name: 'pool', input: [LOOKUP_INPUT], output: ['pooled'], attribute: [intsAttribute('kernel_shape', [window, window]), intsAttribute('strides', [window, window])] };
      return [pool, flatten('pooled', LOOKUP_FEATURES)];
    }
    case 'Conv': {
      const pad = Math.floor(spec.kernel / 2);
      const attribute = [intsAttribute('kernel_shape', [spec.kernel, spec.kernel]), intsAttribute('strides', [spec.stride, spec.stride]), intsAttribute('pads', [pad, pad, pad, pad])];
      const conv = { opType: 'Conv', name: 'conv', input: [LOOKUP_INPUT, 'conv/W', 'conv/b'], output: ['conv/out'], attribute };
      return [conv, relu('conv/out', 'conv/relu'), flatten('conv/relu', LOOKUP_FEATURES)];
    }
  }
}

export const encodeLookupModel = (...args: Parameters<typeof lookupModel>): Uint8Array => encodeOnnxModel(lookupModel(...args));
export const encodeFrozenModel = (...args: Parameters<typeof frozenModel>): Uint8Array => encodeOnnxModel(frozenModel(...args));

/**
 * Writes a model, loads it, and deletes its file: a cache retrained online writes a new version
 * every few hundred requests, which on a long-lived stream would fill the disk. The runtime keeps
 * what it loaded.
 */
export async function loadWritten(runtime: ModelRuntime, name: string, file: string, bytes: Uint8Array): Promise<LoadedModel> {
  await writeFile(file, bytes);
  try {
    return await runtime.load({ name, file });
  } finally {
    await rm(file, { force: true });
  }
}
