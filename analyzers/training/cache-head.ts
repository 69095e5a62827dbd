import type * as TensorFlow from '@tensorflow/tfjs';
import type { Scalar, Tensor, Variable } from '@tensorflow/tfjs';
import { seededRandom } from '../../core/index.js';
import { CONV_CHANNELS, poolWindow, weightShapes, type CacheWeights, type HiddenShape, type VariantSpec } from '../cache/index.js';
import { loadTensorFlow, shuffle } from './head.js';

/**
 * Training a learned cache (GATI §4.1, digest §2.4): the predictor learns the base model's output
 * distribution from a hidden output with a distillation loss (λ·CE on the base's top class +
 * (1 − λ)·τ²·CE on the distributions softened by τ), then the selector learns, on the predictor's
 * distribution, whether its top class is the base's, with false positives weighted above false
 * negatives. Given `init`, it fine-tunes those weights (online retraining) instead of starting anew.
 */
export interface CacheHeadJob {
  variant: VariantSpec;
  shape: HiddenShape;
  /** Row-major [rows, C, H, W], ONNX's layout. */
  hidden: Float32Array;
  /** The base model's distribution over the cache's classes per row, row-major [rows, classes]. */
  targets: Float32Array;
  classes: number;
  /** A class no hit may answer (the cache's "other": the base's classes it does not know). */
  otherClass?: number;
  /** Passes over the rows, at least; more where fewer would make fewer than `minSteps` optimizer steps. @defaultValue 10 */
  epochs?: number;
  /** Adam steps at least, for the predictor (the selector takes twice as many): a small set's 10 epochs are too few steps to learn it. @defaultValue 150 */
  minSteps?: number;
  /** @defaultValue 0.005 */
  learningRate?: number;
  /** @defaultValue 32 */
  batchSize?: number;
  /** τ. @defaultValue 2 */
  temperature?: number;
  /** λ, the hard label's share of the loss. @defaultValue 0.5 */
  hardWeight?: number;
  /** w_FP against w_FN = 1. @defaultValue 4 */
  falsePositiveWeight?: number;
  /** @defaultValue 1 */
  seed?: number;
  init?: CacheWeights;
  /**
   * With `init`, `head` keeps the predictor's layers below its last dense one as they are and
   * retrains that layer and the selector: the frozen layers run once per row instead of once per
   * row and epoch, which makes online retraining fast. @defaultValue 'all'
   */
  retrain?: 'all' | 'head';
  /** Rows to look up with the trained cache, row-major [rows, C, H, W]. */
  evaluate?: Float32Array;
}

export interface TrainedCache {
  weights: CacheWeights;
  /** Mean loss of the predictor's last epoch. */
  loss: number;
  backend: string;
  trainMs: number;
  /** Per row of `evaluate`: the predictor's top class and the selector's output. */
  evaluation?: { predicted: Int32Array; hit: Float32Array };
}

type Tf = typeof TensorFlow;

export async function trainCacheHead(job: CacheHeadJob): Promise<TrainedCache> {
  const { variant, shape, hidden, targets, classes, learningRate = 0.005, batchSize = 32, temperature = 2, hardWeight = 0.5 } = job;
  const { falsePositiveWeight = 4, seed = 1, otherClass = -1, minSteps = 150 } = job;
  const rowSize = shape.channels * shape.height * shape.width;
  const rows = targets.length / classes;
  const epochs = Math.max(job.epochs ?? 10, Math.ceil(minSteps / Math.ceil(rows / batchSize)));
  if (!Number.isInteger(rows) || rows === 0 || hidden.length !== rows * rowSize) {
    throw new RangeError(`trainCacheHead: ${hidden.length} hidden values and ${targets.length} targets for ${classes} classes of ${shape.channels}×${shape.height}×${shape.width}`);
  }
  const tf = await loadTensorFlow();
  const started = performance.now();
  const random = seededRandom(seed);
  const variables = initialVariables(tf, variant, shape, classes, seed, job.init);
  const x = tf.tensor4d(hidden, [rows, shape.channels, shape.height, shape.width]);
  const y = tf.tensor2d(targets, [rows, classes]);
  let frozen: Tensor | undefined;
  try {
    const order = Array.from({ length: rows }, (_, i) => i);
    const selectorVariables = Object.entries(variables).filter(([name]) => name.startsWith('sel')).map(([, value]) => value);
    const headOnly = job.retrain === 'head' && job.init !== undefined;
    const predictorVariables = Object.entries(variables)
      .filter(([name]) => (headOnly ? name.startsWith('out/') : !name.startsWith('sel')))
      .map(([, value]) => value);
    // Frozen layers: their output computed once.
    frozen = headOnly ? tf.tidy(() => denseFeatures(tf, x, variables, variant, shape)) : undefined;
    const features = frozen;
    const logitsOf = (rowsOf: Tensor): Tensor =>
      features ? dense(tf, tf.gather(features, rowsOf), variables, 'out') : predictorLogits(tf, tf.gather(x, rowsOf), variables, variant, shape);
    /** Adam over shuffled minibatches; `step` gets the batch's row indices and targets. */
    const minibatches = async (step: (rowsOf: Tensor, yb: Tensor) => Scalar, optimizer: TensorFlow.Optimizer, passes: number, trained: Variable[]): Promise<number> => {
      let loss = NaN;
      for (let epoch = 0; epoch < passes; epoch++) {
        shuffle(order, random);
        const last = epoch === passes - 1;
        let sum = 0;
        for (let start = 0; start < rows; start += batchSize) {
          const indices = tf.tensor1d(order.slice(start, start + batchSize), 'int32');
          const yb = tf.gather(y, indices);
          const cost = optimizer.minimize(() => step(indices, yb), last, trained);
          if (last) sum += ((await cost?.data())?.[0] ?? NaN) * (indices.shape[0] ?? 0);
          tf.dispose([indices, yb, ...(cost ? [cost] : [])]);
        }
        loss = sum / rows;
      }
      return loss;
    };

    const predictorOptimizer = tf.train.adam(learningRate);
    const hard = (yb: Tensor): Tensor => tf.oneHot(tf.argMax(yb, 1), classes);
    // Softened targets: the distribution to the power 1/τ, normalised (softmax of log p / τ).
    const soft = (yb: Tensor): Tensor => tf.softmax(tf.div(tf.log(tf.add(yb, 1e-7)), temperature));
    const loss = await minibatches(
      (rowsOf, yb) => {
        const logits = logitsOf(rowsOf);
        const distilled = tf.mul(tf.losses.softmaxCrossEntropy(soft(yb), tf.div(logits, temperature)), temperature * temperature);
        return tf.add(tf.mul(tf.losses.softmaxCrossEntropy(hard(yb), logits), hardWeight), tf.mul(distilled, 1 - hardWeight)) as Scalar;
      },
      predictorOptimizer,
      epochs,
      predictorVariables,
    ).finally(() => predictorOptimizer.dispose());

    // The selector learns from what the trained (now fixed) predictor answers: a hit is right
    // when its top class is the base's and is not "other".
    const probabilities = tf.tidy(() => tf.softmax(features ? dense(tf, features, variables, 'out') : predictorLogits(tf, x, variables, variant, shape)));
    tf.dispose(features);
    const selectorOptimizer = tf.train.adam(learningRate * 2);
    try {
      await minibatches(
        (rowsOf, yb) => {
          const pb = tf.gather(probabilities, rowsOf);
          const top = tf.argMax(pb, 1);
          const right = tf.cast(tf.logicalAnd(tf.equal(top, tf.argMax(yb, 1)), tf.notEqual(top, otherClass)), 'float32');
          const p = tf.clipByValue(selectorHit(tf, pb, variables), 1e-6, 1 - 1e-6);
          const perRow = tf.neg(tf.add(tf.mul(right, tf.log(p)), tf.mul(tf.mul(tf.sub(1, right), tf.log(tf.sub(1, p))), falsePositiveWeight)));
          return tf.mean(perRow) as Scalar;
        },
        selectorOptimizer,
        epochs * 2,
        selectorVariables,
      );
    } finally {
      tf.dispose(probabilities);
      selectorOptimizer.dispose();
    }

    return {
      weights: Object.fromEntries(await Promise.all(Object.entries(variables).map(async ([name, value]) => [name, Float32Array.from(await value.data())] as const))),
      loss,
      backend: tf.getBackend(),
      trainMs: performance.now() - started,
      ...(job.evaluate ? { evaluation: await lookUp(tf, job.evaluate, variables, variant, shape) } : {}),
    };
  } finally {
    // `frozen` too where training failed before letting go of it (disposing twice is harmless).
    tf.dispose([x, y, ...Object.values(variables), ...(frozen ? [frozen] : [])]);
  }
}

type Variables = Record<string, Variable>;

/** Weights are kept in ONNX's layouts (see `CacheWeights`), the conv's too: it runs as k² shifted matrix products. */
function initialVariables(tf: Tf, variant: VariantSpec, shape: HiddenShape, classes: number, seed: number, init: CacheWeights | undefined): Variables {
  const shapes = weightShapes(variant, shape, classes);
  return Object.fromEntries(
    Object.entries(shapes).map(([name, dims], i) => {
      const given = init?.[name];
      if (given && given.length !== dims.reduce((a, b) => a * b, 1)) throw new RangeError(`trainCacheHead: init weight '${name}' has ${given.length} values for ${dims.join('×')}`);
      // He initialisation: the fan-in is every dimension but the output one.
      const fanIn = name === 'conv/W' ? dims.slice(1).reduce((a, b) => a * b, 1) : dims[0]!;
      const value = given ? tf.tensor(given, dims) : name.endsWith('/b') ? tf.zeros(dims) : tf.randomNormal(dims, 0, Math.sqrt(2 / fanIn), 'float32', seed + i);
      return [name, tf.variable(value)];
    }),
  );
}

const dense = (tf: Tf, x: Tensor, v: Variables, layer: string): Tensor => tf.add(tf.matMul(x, v[`${layer}/W`]!), v[`${layer}/b`]!);

/** The predictor's logits for x [n, C, H, W], computed as the ONNX model computes them. */
function predictorLogits(tf: Tf, x: Tensor, v: Variables, variant: VariantSpec, shape: HiddenShape): Tensor {
  return dense(tf, denseFeatures(tf, x, v, variant, shape), v, 'out');
}

/** What the predictor's last dense layer reads, [n, denseInput]. */
function denseFeatures(tf: Tf, x: Tensor, v: Variables, variant: VariantSpec, shape: HiddenShape): Tensor {
  const n = x.shape[0]!;
  const flatNchw = (nhwc: Tensor): Tensor => tf.reshape(tf.transpose(nhwc, [0, 3, 1, 2]), [n, -1]);
  switch (variant.family) {
    case 'FC':
      return tf.relu(dense(tf, tf.reshape(x, [n, -1]), v, 'fc'));
    case 'Pool': {
      const window = poolWindow(variant, shape);
      return flatNchw(tf.avgPool(tf.transpose(x, [0, 2, 3, 1]) as TensorFlow.Tensor4D, window, window, 'valid'));
    }
    case 'Conv':
      return flatNchw(tf.relu(convBySlices(tf, x, v, variant.kernel, variant.stride)));
  }
}

/**
 * Conv with padding ⌊k/2⌋ as one matrix product of the k² shifted slices (im2col) with the
 * filter: TensorFlow.js' WebAssembly backend has no gradient for conv2d's filter, and slices and
 * products have one. Input [n, C, H, W], filter `conv/W` [O, C, k, k]; output NHWC [n, H', W', O].
 */
function convBySlices(tf: Tf, x: Tensor, v: Variables, kernel: number, stride: number): Tensor {
  const [n, channels, height, width] = x.shape as [number, number, number, number];
  const pad = Math.floor(kernel / 2);
  const outH = Math.floor((height + 2 * pad - kernel) / stride) + 1;
  const outW = Math.floor((width + 2 * pad - kernel) / stride) + 1;
  // Padded so that every tap's strided slice can be read from an [outH·stride, outW·stride] block.
  const padded = tf.pad(tf.transpose(x, [0, 2, 3, 1]), [
    [0, 0],
    [pad, Math.max(0, outH * stride + kernel - 1 - height - pad)],
    [pad, Math.max(0, outW * stride + kernel - 1 - width - pad)],
    [0, 0],
  ]);
  const taps: Tensor[] = [];
  for (let dy = 0; dy < kernel; dy++) {
    for (let dx = 0; dx < kernel; dx++) {
      const block = tf.slice(padded, [0, dy, dx, 0], [n, outH * stride, outW * stride, channels]);
      if (stride === 1) taps.push(block);
      else {
        // Every stride-th row, then every stride-th column, in 4-D slices (faster than 6-D).
        const rows = tf.slice(tf.reshape(block, [n, outH, stride, outW * stride * channels]), [0, 0, 0, 0], [n, outH, 1, outW * stride * channels]);
        taps.push(tf.slice(tf.reshape(rows, [n, outH, outW, stride * channels]), [0, 0, 0, 0], [n, outH, outW, channels]));
      }
    }
  }
  // [n·H'·W', k·k·C] against the filter as [k·k·C, O] (rows ordered dy, dx, c like the taps).
  const patches = tf.reshape(tf.concat(taps.map((t) => tf.reshape(t, [n, outH, outW, channels])), 3), [n * outH * outW, kernel * kernel * channels]);
  const filter = tf.reshape(tf.transpose(v['conv/W']!, [2, 3, 1, 0]), [kernel * kernel * channels, CONV_CHANNELS]);
  return tf.reshape(tf.add(tf.matMul(patches, filter), v['conv/b']!), [n, outH, outW, CONV_CHANNELS]);
}

const selectorHit = (tf: Tf, probabilities: Tensor, v: Variables): Tensor => tf.reshape(tf.sigmoid(dense(tf, tf.relu(dense(tf, probabilities, v, 'sel1')), v, 'sel2')), [-1]);

async function lookUp(tf: Tf, rows: Float32Array, v: Variables, variant: VariantSpec, shape: HiddenShape): Promise<{ predicted: Int32Array; hit: Float32Array }> {
  const count = rows.length / (shape.channels * shape.height * shape.width);
  const [top, hit] = tf.tidy(() => {
    const probabilities = tf.softmax(predictorLogits(tf, tf.tensor4d(rows, [count, shape.channels, shape.height, shape.width]), v, variant, shape));
    return [tf.argMax(probabilities, 1), selectorHit(tf, probabilities, v)];
  });
  try {
    return { predicted: Int32Array.from(await top.data()), hit: Float32Array.from(await hit.data()) };
  } finally {
    tf.dispose([top, hit]);
  }
}
