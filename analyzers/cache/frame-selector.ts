import { builtModel, encodeOnnxModel, floatInitializer, floatValueInfo, intAttribute, intsAttribute, type OnnxModel } from '../onnx/index.js';
import type { CacheConfig } from '../../core/index.js';
import type { HeadJob, TrainedHead } from '../training/index.js';
import { calibrate } from './explore.js';
import { concat } from './tensors.js';
import type { HiddenShape } from './variant.js';

/**
 * The lookup of a detector's frame cache as one ONNX model. It pools a frame's hidden output over
 * a grid (`pooled` [batch, C, h, w], the Pool family of GATI's Table 3) and compares it with the
 * pooled output of the frame whose answer would be reused (`reference`, same shape): `change`
 * [batch, 2C] is, per channel, the largest and the mean |pooled − reference| over the grid's
 * cells (an object that came, went or moved changes a few cells much; noise changes all a
 * little). The selector, a linear layer on `change`, gives `probabilities` [batch, 2], of which
 * column 1 is "the reference's objects are still this frame's". A stream keeps only pooled grids.
 * `fitFrameSelector` trains the linear layer on labelled changes and calibrates its threshold.
 */
export const FRAME_HIDDEN = 'hidden';
export const FRAME_REFERENCE = 'reference';
export const FRAME_POOLED = 'pooled';
export const FRAME_CHANGE = 'change';
export const FRAME_PROBABILITIES = 'probabilities';

/** The selector's weights: `W` [2C, 2] and `b` [2], as `trainHead` gives them. */
export interface FrameSelectorWeights {
  weights: Float32Array;
  bias: Float32Array;
}

/** The pooling window (and stride) that leaves a grid of at most `cells` per channel. */
export function frameGridWindow(shape: HiddenShape, cells: number): number {
  for (let window = 1; ; window++) {
    if (Math.floor(shape.height / window) * Math.floor(shape.width / window) <= cells) return window;
  }
}

/** The pooled grid's shape. */
export const frameGrid = (shape: HiddenShape, window: number): HiddenShape => ({ channels: shape.channels, height: Math.floor(shape.height / window), width: Math.floor(shape.width / window) });

export function frameSelectorModel(shape: HiddenShape, window: number, selector: FrameSelectorWeights): OnnxModel {
  const grid = frameGrid(shape, window);
  const features = 2 * shape.channels;
  if (selector.weights.length !== features * 2 || selector.bias.length !== 2) {
    throw new RangeError(`frameSelectorModel: weights for ${selector.weights.length / 2} features and ${selector.bias.length} classes, not ${features} and 2`);
  }
  const overCells = [intsAttribute('axes', [2, 3]), intAttribute('keepdims', 0)];
  return builtModel({
    name: 'frame_cache_lookup',
    node: [
      { opType: 'AveragePool', name: 'pool', input: [FRAME_HIDDEN], output: [FRAME_POOLED], attribute: [intsAttribute('kernel_shape', [window, window]), intsAttribute('strides', [window, window])] },
      { opType: 'Sub', name: 'difference', input: [FRAME_POOLED, FRAME_REFERENCE], output: ['difference'] },
      { opType: 'Abs', name: 'magnitude', input: ['difference'], output: ['magnitude'] },
      { opType: 'ReduceMax', name: 'largest', input: ['magnitude'], output: ['largest'], attribute: overCells },
      { opType: 'ReduceMean', name: 'mean', input: ['magnitude'], output: ['mean'], attribute: overCells },
      { opType: 'Concat', name: 'change', input: ['largest', 'mean'], output: [FRAME_CHANGE], attribute: [intAttribute('axis', 1)] },
      { opType: 'Gemm', name: 'selector', input: [FRAME_CHANGE, 'W', 'b'], output: ['logits'] },
      { opType: 'Softmax', name: 'softmax', input: ['logits'], output: [FRAME_PROBABILITIES], attribute: [intAttribute('axis', 1)] },
    ],
    initializer: [floatInitializer('W', [features, 2], selector.weights), floatInitializer('b', [2], selector.bias)],
    input: [
      floatValueInfo(FRAME_HIDDEN, ['batch', shape.channels, shape.height, shape.width]),
      floatValueInfo(FRAME_REFERENCE, ['batch', grid.channels, grid.height, grid.width]),
    ],
    output: [
      floatValueInfo(FRAME_POOLED, ['batch', grid.channels, grid.height, grid.width]),
      floatValueInfo(FRAME_CHANGE, ['batch', features]),
      floatValueInfo(FRAME_PROBABILITIES, ['batch', 2]),
    ],
  });
}

/** The model's `change` for two pooled grids of `channels` channels: the selector's input, for training on pairs. */
export function frameChange(a: Float32Array, b: Float32Array, channels: number): Float32Array {
  const cells = a.length / channels;
  const change = new Float32Array(2 * channels);
  for (let c = 0; c < channels; c++) {
    let largest = 0;
    let sum = 0;
    for (let i = c * cells; i < (c + 1) * cells; i++) {
      const d = Math.abs(a[i]! - b[i]!);
      largest = Math.max(largest, d);
      sum += d;
    }
    change[c] = largest;
    change[channels + c] = sum / cells;
  }
  return change;
}

export const encodeFrameSelector = (...args: Parameters<typeof frameSelectorModel>): Uint8Array => encodeOnnxModel(frameSelectorModel(...args));

/** Labelled pairs: per pair `featureCount` features (how a frame's feature map changed since an earlier one), and whether their objects were the same. */
export interface FramePairs {
  featureCount: number;
  features: Float32Array;
  same: boolean[];
}

/** A selector's weights, and its threshold calibrated on held-out pairs (∞ where it cannot vouch for its hits). */
export interface FittedSelector {
  weights: Float32Array;
  bias: Float32Array;
  threshold: number;
  expectedHitRate: number;
  expectedAccuracy: number;
}

/**
 * A selector trained on labelled pairs: every fourth measures it, the rest train it; its threshold
 * is the lowest at which its held-out hits reach the accuracy target (∞ where none does).
 */
export async function fitFrameSelector(
  samples: readonly { features: Float32Array; same: boolean }[],
  featureCount: number,
  config: Pick<CacheConfig, 'accuracyTarget' | 'falsePositiveWeight'>,
  train: (job: HeadJob) => Promise<TrainedHead>,
  seed: number,
  thresholds?: readonly number[],
): Promise<FittedSelector> {
  const heldOut = samples.filter((_, i) => i % 4 === 3);
  const training = samples.filter((_, i) => i % 4 !== 3);
  const trained = await train({
    features: concat(training.map((p) => p.features)),
    featureCount,
    labels: Int32Array.from(training, (p) => (p.same ? 1 : 0)),
    classes: 2,
    classWeights: [config.falsePositiveWeight, 1],
    evaluate: concat(heldOut.map((p) => p.features)),
    seed,
  });
  const answers = heldOut.map((p, i) => ({ hit: trained.probabilities![2 * i + 1]!, right: p.same }));
  const calibrated = calibrate(answers, config.accuracyTarget, { fallback: Infinity, ...(thresholds ? { thresholds } : {}) });
  const vouched = calibrated.accuracy >= config.accuracyTarget;
  return { weights: trained.weights, bias: trained.bias, threshold: vouched ? calibrated.threshold : Infinity, expectedHitRate: vouched ? calibrated.hitRate : 0, expectedAccuracy: calibrated.accuracy };
}
