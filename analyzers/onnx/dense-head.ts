import { encodeOnnxModel, type OnnxModel } from './onnx-model.js';

/**
 * A trained classifier head as an ONNX model, so that onnxruntime serves it like any other:
 * `features` [batch, F] → Gemm with W [F, C] and b [C] → Softmax → `probabilities` [batch, C].
 */
export const HEAD_INPUT = 'features';
export const HEAD_OUTPUT = 'probabilities';

/** ONNX TensorProto.DataType.FLOAT. */
const FLOAT = 1;

export function denseHeadModel(head: { weights: Float32Array; bias: Float32Array; featureCount: number; classes: number }): OnnxModel {
  const { weights, bias, featureCount, classes } = head;
  if (weights.length !== featureCount * classes || bias.length !== classes) {
    throw new RangeError(`denseHeadModel: ${weights.length} weights and ${bias.length} biases for ${featureCount} features and ${classes} classes`);
  }
  const tensor = (name: string, dims: number[], values: Float32Array) => ({
    name,
    dims,
    dataType: FLOAT,
    rawData: new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength)),
  });
  const valueInfo = (name: string, width: number) => ({
    name,
    type: { tensorType: { elemType: FLOAT, shape: { dim: [{ dimParam: 'batch' }, { dimValue: width }] } } },
  });
  return {
    irVersion: 8,
    producerName: 'panoptes',
    opsetImport: [{ domain: '', version: 13 }],
    graph: {
      name: 'dense_head',
      node: [
        { opType: 'Gemm', name: 'head/gemm', input: [HEAD_INPUT, 'head/W', 'head/b'], output: ['head/logits'] },
        { opType: 'Softmax', name: 'head/softmax', input: ['head/logits'], output: [HEAD_OUTPUT], attribute: [{ name: 'axis', type: 2, i: 1 }] },
      ],
      initializer: [tensor('head/W', [featureCount, classes], weights), tensor('head/b', [classes], bias)],
      input: [valueInfo(HEAD_INPUT, featureCount)],
      output: [valueInfo(HEAD_OUTPUT, classes)],
    },
  };
}

/** The head as ONNX bytes. */
export const encodeDenseHead = (head: Parameters<typeof denseHeadModel>[0]): Uint8Array => encodeOnnxModel(denseHeadModel(head));
