import { builtModel, encodeOnnxModel, floatInitializer, floatValueInfo, intAttribute, type OnnxModel } from './onnx-model.js';

/**
 * A trained classifier head as an ONNX model, so that onnxruntime serves it like any other:
 * `features` [batch, F] → Gemm with W [F, C] and b [C] → Softmax → `probabilities` [batch, C].
 */
export const HEAD_INPUT = 'features';
export const HEAD_OUTPUT = 'probabilities';

export function denseHeadModel(head: { weights: Float32Array; bias: Float32Array; featureCount: number; classes: number }): OnnxModel {
  const { weights, bias, featureCount, classes } = head;
  if (weights.length !== featureCount * classes || bias.length !== classes) {
    throw new RangeError(`denseHeadModel: ${weights.length} weights and ${bias.length} biases for ${featureCount} features and ${classes} classes`);
  }
  return builtModel({
    name: 'dense_head',
    node: [
      { opType: 'Gemm', name: 'head/gemm', input: [HEAD_INPUT, 'head/W', 'head/b'], output: ['head/logits'] },
      { opType: 'Softmax', name: 'head/softmax', input: ['head/logits'], output: [HEAD_OUTPUT], attribute: [intAttribute('axis', 1)] },
    ],
    initializer: [floatInitializer('head/W', [featureCount, classes], weights), floatInitializer('head/b', [classes], bias)],
    input: [floatValueInfo(HEAD_INPUT, ['batch', featureCount])],
    output: [floatValueInfo(HEAD_OUTPUT, ['batch', classes])],
  });
}

/** The head as ONNX bytes. */
export const encodeDenseHead = (head: Parameters<typeof denseHeadModel>[0]): Uint8Array => encodeOnnxModel(denseHeadModel(head));
