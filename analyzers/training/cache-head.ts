import type * as TensorFlow from '@tensorflow/tfjs';
import type { Scalar, Tensor, Variable } from '@tensorflow/tfjs';
import { seededRandom } from '../../core/index.js';
import { denseInput, poolWindow, weightShapes, type CacheWeights, type HiddenShape, type VariantSpec } from '../cache/index.js';
import { loadTensorFlow, shuffle } from './head.js';
import { convBySlices, convForward, denseLayer, mapRows, rowBatch, type Dense } from './ops.js';

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
  hidden?: Float32Array;
  /**
   * Instead of `hidden`, where only the head is retrained: what the layers kept as they are give
   * for each row, row-major [rows, denseInput] (the lookup model's frozen part computes it once
   * per row; see `frozenModel`). `evaluate` is then in this form too.
   */
  features?: Float32Array;
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
  /** Rows to look up with the trained cache, in the form the rows are given: row-major [rows, C, H, W], or [rows, denseInput] with `features`. */
  evaluate?: Float32Array;
}

export interface TrainedCache {
  weights: CacheWeights;
  /** Mean loss of the predictor's last epoch. */
  loss: number;
  backend: string;
  /** Training and the look-up of `evaluate`. */
  trainMs: number;
  /** Per row of `evaluate`: the predictor's top class and the selector's output. */
  evaluation?: { predicted: Int32Array; hit: Float32Array };
}

type Tf = typeof TensorFlow;

/**
 * A conv variant's training step holds its patches in the WebAssembly heap (4 GB at most, and
 * lost to the thread once exhausted); its minibatch is kept within this.
 */
const CONV_STEP_BYTES = 2 ** 30;

/**
 * `asked` rows a step, fewer for a conv variant whose step would outgrow CONV_STEP_BYTES: per row,
 * the padded input, the k² blocks read for the taps (with their halves and quarters where the
 * stride is 2 or more), the patches and their product's copy; the heap held about twice that
 * (3 GB when 17 rows of a 5×5 conv of stride 2 on FaceRes' 128×56×56 layer ran out).
 */
export function minibatchOf(variant: VariantSpec, shape: HiddenShape, asked: number): number {
  if (variant.family !== 'Conv') return asked;
  const { kernel, stride } = variant;
  const pad = Math.floor(kernel / 2);
  const [outH, outW] = [shape.height, shape.width].map((side) => Math.floor((side + 2 * pad - kernel) / stride) + 1) as [number, number];
  const blocks = kernel * kernel * outH * stride * outW * stride * shape.channels * (stride > 1 ? 1.75 : 1);
  const patches = outH * outW * kernel * kernel * shape.channels;
  const padded = (shape.height + 2 * pad) * (shape.width + 2 * pad) * shape.channels;
  const rowBytes = 2 * 4 * (blocks + 2 * patches + padded);
  return Math.max(1, Math.min(asked, Math.floor(CONV_STEP_BYTES / rowBytes)));
}

export async function trainCacheHead(job: CacheHeadJob): Promise<TrainedCache> {
  const { variant, shape, targets, classes, learningRate = 0.005, temperature = 2, hardWeight = 0.5 } = job;
  const batchSize = minibatchOf(variant, shape, job.batchSize ?? 32);
  const { falsePositiveWeight = 4, seed = 1, otherClass = -1, minSteps = 150 } = job;
  const hiddenDims = [shape.channels, shape.height, shape.width];
  const rowSize = shape.channels * shape.height * shape.width;
  const rows = targets.length / classes;
  const epochs = Math.max(job.epochs ?? 10, Math.ceil(minSteps / Math.ceil(rows / batchSize)));
  const headOnly = job.retrain === 'head' && job.init !== undefined;
  const featureCount = denseInput(variant, shape);
  const given = job.features ?? job.hidden;
  if ((job.features === undefined) === (job.hidden === undefined) || (job.features && !headOnly)) {
    throw new RangeError('trainCacheHead: give the rows as `hidden`, or as `features` where only the head is retrained from `init`');
  }
  if (!Number.isInteger(rows) || rows === 0 || given!.length !== rows * (job.features ? featureCount : rowSize)) {
    const form = job.features ? `${featureCount} features` : `${shape.channels}×${shape.height}×${shape.width}`;
    throw new RangeError(`trainCacheHead: ${given!.length} values and ${targets.length} targets for ${classes} classes of ${form}`);
  }
  const hidden = job.hidden ?? new Float32Array(0);
  const tf = await loadTensorFlow();
  const started = performance.now();
  const random = seededRandom(seed);
  const variables = initialVariables(tf, variant, shape, classes, seed, job.init);
  const net: Net = { tf, v: variables, variant, shape, data: denseLayer(tf, false), inner: denseLayer(tf, true) };
  try {
    const order = Array.from({ length: rows }, (_, i) => i);
    const selectorVariables = Object.entries(variables).filter(([name]) => name.startsWith('sel')).map(([, value]) => value);
    const predictorVariables = Object.entries(variables)
      .filter(([name]) => (headOnly ? name.startsWith('out/') : !name.startsWith('sel')))
      .map(([, value]) => value);
    // Frozen layers: their output computed once, forward only.
    const frozen = headOnly ? (job.features ?? (await mapRows(tf, hidden, hiddenDims, (x) => denseFeatures(net, x, false)))) : undefined;
    const outOnFrozen = (x: Tensor) => net.data(x, variables['out/W']!, variables['out/b']!);
    const logitsOf = (batch: number[]): Tensor =>
      frozen
        ? outOnFrozen(tf.tensor2d(rowBatch(frozen, featureCount, batch), [batch.length, featureCount]))
        : predictorLogits(net, tf.tensor(rowBatch(hidden, rowSize, batch), [batch.length, ...hiddenDims]), true);
    /** Adam over shuffled minibatches; `step` gets the batch's rows and their targets. */
    const minibatches = async (step: (batch: number[], yb: Tensor) => Scalar, optimizer: TensorFlow.Optimizer, passes: number, trained: Variable[]): Promise<number> => {
      let loss = NaN;
      for (let epoch = 0; epoch < passes; epoch++) {
        shuffle(order, random);
        const last = epoch === passes - 1;
        let sum = 0;
        for (let start = 0; start < rows; start += batchSize) {
          const batch = order.slice(start, start + batchSize);
          const yb = tf.tensor2d(rowBatch(targets, classes, batch), [batch.length, classes]);
          const cost = optimizer.minimize(() => step(batch, yb), last, trained);
          if (last) sum += ((await cost?.data())?.[0] ?? NaN) * batch.length;
          tf.dispose([yb, ...(cost ? [cost] : [])]);
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
      (batch, yb) => {
        const logits = logitsOf(batch);
        const distilled = tf.mul(tf.losses.softmaxCrossEntropy(soft(yb), tf.div(logits, temperature)), temperature * temperature);
        return tf.add(tf.mul(tf.losses.softmaxCrossEntropy(hard(yb), logits), hardWeight), tf.mul(distilled, 1 - hardWeight)) as Scalar;
      },
      predictorOptimizer,
      epochs,
      predictorVariables,
    ).finally(() => predictorOptimizer.dispose());

    // The selector learns from what the trained (now fixed) predictor answers: a hit is right
    // when its top class is the base's and is not "other".
    const probabilities = frozen
      ? await mapRows(tf, frozen, [featureCount], (f) => tf.softmax(outOnFrozen(f)))
      : await mapRows(tf, hidden, hiddenDims, (x) => tf.softmax(predictorLogits(net, x, false)));
    const selectorOptimizer = tf.train.adam(learningRate * 2);
    try {
      await minibatches(
        (batch, yb) => {
          const pb = tf.tensor2d(rowBatch(probabilities, classes, batch), [batch.length, classes]);
          const top = tf.argMax(pb, 1);
          const right = tf.cast(tf.logicalAnd(tf.equal(top, tf.argMax(yb, 1)), tf.notEqual(top, otherClass)), 'float32');
          const p = tf.clipByValue(selectorHit(net, pb), 1e-6, 1 - 1e-6);
          const perRow = tf.neg(tf.add(tf.mul(right, tf.log(p)), tf.mul(tf.mul(tf.sub(1, right), tf.log(tf.sub(1, p))), falsePositiveWeight)));
          return tf.mean(perRow) as Scalar;
        },
        selectorOptimizer,
        epochs * 2,
        selectorVariables,
      );
    } finally {
      selectorOptimizer.dispose();
    }

    const weights = Object.fromEntries(await Promise.all(Object.entries(variables).map(async ([name, value]) => [name, Float32Array.from(await value.data())] as const)));
    const evaluation = job.evaluate && (job.features ? await lookUpFeatures(net, job.evaluate) : await lookUp(net, job.evaluate));
    return { weights, loss, backend: tf.getBackend(), trainMs: performance.now() - started, ...(evaluation ? { evaluation } : {}) };
  } finally {
    tf.dispose(Object.values(variables));
  }
}

type Variables = Record<string, Variable>;

/** Weights are kept in ONNX's layouts (see `CacheWeights`), the conv's too. */
function initialVariables(tf: Tf, variant: VariantSpec, shape: HiddenShape, classes: number, seed: number, init: CacheWeights | undefined): Variables {
  const shapes = weightShapes(variant, shape, classes);
  return Object.fromEntries(
    Object.entries(shapes).map(([name, dims], i) => {
      const given = init?.[name];
      if (given && given.length !== dims.reduce((a, b) => a * b, 1)) throw new RangeError(`trainCacheHead: init weight '${name}' has ${given.length} values for ${dims.join('×')}`);
      // He initialisation: the fan-in is every dimension but the output one.
      const fanIn = name === 'conv/W' ? dims.slice(1).reduce((a, b) => a * b, 1) : dims[0]!;
      // A variable made of a tensor shares its memory, and the tensor would keep it: made in a tidy.
      return [name, tf.tidy(() => tf.variable(given ? tf.tensor(given, dims) : name.endsWith('/b') ? tf.zeros(dims) : tf.randomNormal(dims, 0, Math.sqrt(2 / fanIn), 'float32', seed + i)))];
    }),
  );
}

/** What the predictor's and selector's layers need: the weights, and dense layers whose input is data (`data`) or has weights below it (`inner`). */
interface Net {
  tf: Tf;
  v: Variables;
  variant: VariantSpec;
  shape: HiddenShape;
  data: Dense;
  inner: Dense;
}

const layer = (dense: Dense, x: Tensor, v: Variables, name: string): Tensor => dense(x, v[`${name}/W`]!, v[`${name}/b`]!);

/** The predictor's logits for x [n, C, H, W], computed as the ONNX model computes them; `training` where its lower layers learn. */
function predictorLogits(net: Net, x: Tensor, training: boolean): Tensor {
  return layer(training && net.variant.family !== 'Pool' ? net.inner : net.data, denseFeatures(net, x, training), net.v, 'out');
}

/** What the predictor's last dense layer reads, [n, denseInput]. */
function denseFeatures(net: Net, x: Tensor, training: boolean): Tensor {
  const { tf, variant, shape } = net;
  const n = x.shape[0]!;
  const flatNchw = (nhwc: Tensor): Tensor => tf.reshape(tf.transpose(nhwc, [0, 3, 1, 2]), [n, -1]);
  switch (variant.family) {
    case 'FC':
      return tf.relu(layer(net.data, tf.reshape(x, [n, -1]), net.v, 'fc'));
    case 'Pool': {
      const window = poolWindow(variant, shape);
      return flatNchw(tf.avgPool(tf.transpose(x, [0, 2, 3, 1]) as TensorFlow.Tensor4D, window, window, 'valid'));
    }
    case 'Conv': {
      const [w, b] = [net.v['conv/W']!, net.v['conv/b']!];
      return flatNchw(tf.relu(training ? convBySlices(tf, x, w, b, variant.stride, net.data) : convForward(tf, x, w, b, variant.stride)));
    }
  }
}

const selectorHit = (net: Net, probabilities: Tensor): Tensor =>
  net.tf.reshape(net.tf.sigmoid(layer(net.inner, net.tf.relu(layer(net.data, probabilities, net.v, 'sel1')), net.v, 'sel2')), [-1]);

/** The trained cache's answers on `rows` [n, C, H, W]: the predictor's top class and the selector's output. */
async function lookUp(net: Net, rows: Float32Array): Promise<{ predicted: Int32Array; hit: Float32Array }> {
  const { tf, shape } = net;
  return answers(net, await mapRows(tf, rows, [shape.channels, shape.height, shape.width], (x) => tf.softmax(predictorLogits(net, x, false))));
}

/** The same, from the frozen layers' output [n, denseInput]. */
async function lookUpFeatures(net: Net, features: Float32Array): Promise<{ predicted: Int32Array; hit: Float32Array }> {
  const { tf, v } = net;
  return answers(net, await mapRows(tf, features, [v['out/W']!.shape[0]!], (f) => tf.softmax(layer(net.data, f, v, 'out'))));
}

async function answers(net: Net, probabilities: Float32Array): Promise<{ predicted: Int32Array; hit: Float32Array }> {
  const { tf } = net;
  const classes = net.v['out/b']!.shape[0]!;
  const [top, hit] = tf.tidy(() => {
    const p = tf.tensor2d(probabilities, [probabilities.length / classes, classes]);
    return [tf.argMax(p, 1), selectorHit(net, p)];
  });
  try {
    return { predicted: Int32Array.from(await top.data()), hit: Float32Array.from(await hit.data()) };
  } finally {
    tf.dispose([top, hit]);
  }
}
