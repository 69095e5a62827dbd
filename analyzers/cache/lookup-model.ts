import { encodeOnnxModel, type OnnxModel } from '../onnx/index.js';
import { CONV_CHANNELS, poolWindow, SELECTOR_HIDDEN, type HiddenShape, type VariantSpec } from './variant.js';

/**
 * A learned cache as one ONNX model, so that a lookup is one onnxruntime run: the predictor
 * reads `hidden` [batch, C, H, W] and gives `probabilities` [batch, classes]; the selector reads
 * those and gives `hit` [batch, 1], its belief that the predictor's top class is the base model's.
 */
export const LOOKUP_INPUT = 'hidden';
export const LOOKUP_PROBABILITIES = 'probabilities';
export const LOOKUP_HIT = 'hit';

/**
 * Trained weights by name, in ONNX's layouts: dense `W` [in, out] and `b` [out]; the conv's
 * `conv/W` [out, in, k, k]. `out/*` is the predictor's last dense layer, `fc/*` FC's hidden
 * layer, `sel1/*` and `sel2/*` the selector's.
 */
export type CacheWeights = Record<string, Float32Array>;

/** The shape of each weight a variant has. */
export function weightShapes(spec: VariantSpec, shape: HiddenShape, classes: number, denseInput: number): Record<string, number[]> {
  const head = { 'out/W': [denseInput, classes], 'out/b': [classes], 'sel1/W': [classes, SELECTOR_HIDDEN], 'sel1/b': [SELECTOR_HIDDEN], 'sel2/W': [SELECTOR_HIDDEN, 1], 'sel2/b': [1] };
  switch (spec.family) {
    case 'FC':
      return { 'fc/W': [shape.channels * shape.height * shape.width, spec.hidden], 'fc/b': [spec.hidden], ...head };
    case 'Pool':
      return head;
    case 'Conv':
      return { 'conv/W': [CONV_CHANNELS, shape.channels, spec.kernel, spec.kernel], 'conv/b': [CONV_CHANNELS], ...head };
  }
}

/** ONNX TensorProto.DataType.FLOAT; AttributeProto types INT and INTS. */
const FLOAT = 1;
const INT = 2;
const INTS = 7;

const ints = (name: string, values: number[]) => ({ name, type: INTS, ints: values });

export function lookupModel(spec: VariantSpec, shape: HiddenShape, classes: number, weights: CacheWeights): OnnxModel {
  const shapes = weightShapes(spec, shape, classes, weights['out/W']!.length / classes);
  for (const [name, dims] of Object.entries(shapes)) {
    const expected = dims.reduce((a, b) => a * b, 1);
    if (weights[name]?.length !== expected) throw new RangeError(`lookupModel: weight '${name}' has ${weights[name]?.length ?? 'no'} values, not ${expected} (${dims.join('×')})`);
  }
  const gemm = (input: string, layer: string, output: string) => ({ opType: 'Gemm', name: `${layer}/gemm`, input: [input, `${layer}/W`, `${layer}/b`], output: [output] });
  const relu = (input: string, output: string) => ({ opType: 'Relu', name: `${output}/relu`, input: [input], output: [output] });
  const flatten = (input: string, output: string) => ({ opType: 'Flatten', name: `${output}/flatten`, input: [input], output: [output], attribute: [{ name: 'axis', type: INT, i: 1 }] });
  const predictor = (() => {
    switch (spec.family) {
      case 'FC':
        return [flatten(LOOKUP_INPUT, 'flat'), gemm('flat', 'fc', 'fc/out'), relu('fc/out', 'fc/relu'), gemm('fc/relu', 'out', 'logits')];
      case 'Pool': {
        const window = poolWindow(spec, shape);
        const pool = { opType: 'AveragePool', name: 'pool', input: [LOOKUP_INPUT], output: ['pooled'], attribute: [ints('kernel_shape', [window, window]), ints('strides', [window, window])] };
        return [pool, flatten('pooled', 'flat'), gemm('flat', 'out', 'logits')];
      }
      case 'Conv': {
        const pad = Math.floor(spec.kernel / 2);
        const attribute = [ints('kernel_shape', [spec.kernel, spec.kernel]), ints('strides', [spec.stride, spec.stride]), ints('pads', [pad, pad, pad, pad])];
        const conv = { opType: 'Conv', name: 'conv', input: [LOOKUP_INPUT, 'conv/W', 'conv/b'], output: ['conv/out'], attribute };
        return [conv, relu('conv/out', 'conv/relu'), flatten('conv/relu', 'flat'), gemm('flat', 'out', 'logits')];
      }
    }
  })();
  const selector = [
    { opType: 'Softmax', name: 'softmax', input: ['logits'], output: [LOOKUP_PROBABILITIES], attribute: [{ name: 'axis', type: INT, i: 1 }] },
    gemm(LOOKUP_PROBABILITIES, 'sel1', 'sel1/out'),
    relu('sel1/out', 'sel1/relu'),
    gemm('sel1/relu', 'sel2', 'sel2/out'),
    { opType: 'Sigmoid', name: 'sigmoid', input: ['sel2/out'], output: [LOOKUP_HIT] },
  ];
  const tensor = (name: string) => {
    const values = weights[name]!;
    return { name, dims: shapes[name], dataType: FLOAT, rawData: new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength)) };
  };
  const valueInfo = (name: string, dims: (number | string)[]) => ({
    name,
    type: { tensorType: { elemType: FLOAT, shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } },
  });
  return {
    irVersion: 8,
    producerName: 'panoptes',
    opsetImport: [{ domain: '', version: 13 }],
    graph: {
      name: 'learned_cache',
      node: [...predictor, ...selector],
      initializer: Object.keys(shapes).map(tensor),
      input: [valueInfo(LOOKUP_INPUT, ['batch', shape.channels, shape.height, shape.width])],
      output: [valueInfo(LOOKUP_PROBABILITIES, ['batch', classes]), valueInfo(LOOKUP_HIT, ['batch', 1])],
    },
  };
}

export const encodeLookupModel = (...args: Parameters<typeof lookupModel>): Uint8Array => encodeOnnxModel(lookupModel(...args));
