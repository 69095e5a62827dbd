import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as TensorFlow from '@tensorflow/tfjs';
import type { Scalar } from '@tensorflow/tfjs';
import { seededRandom } from '../../core/index.js';
import { denseLayer, rowBatch } from './ops.js';

/**
 * A classifier head trained on features a network computed once (thesis §5.2: the lower layers'
 * outputs are pre-forwarded and kept; only the top layer is retrained): softmax regression,
 * logits = features · W + b, by Adam on the cross-entropy. TensorFlow.js does the arithmetic on
 * the fastest backend that loads: its native bindings (`@tensorflow/tfjs-node-gpu`,
 * `@tensorflow/tfjs-node`) where installed, else WebAssembly, else plain JavaScript.
 */

export interface HeadJob {
  /** Row-major [rows, featureCount]. */
  features: Float32Array;
  featureCount: number;
  /** Class index of each row, 0..classes−1. */
  labels: Int32Array;
  classes: number;
  /** Passes over the rows, at least; more where fewer would make fewer than `minSteps` optimizer steps. @defaultValue 20 */
  epochs?: number;
  /** Adam steps at least: 20 epochs of a small set (a stream's own pool, a few dozen rows) are 20 steps, too few to learn it. @defaultValue 100 */
  minSteps?: number;
  /** @defaultValue 0.01 */
  learningRate?: number;
  /** @defaultValue 256 */
  batchSize?: number;
  /** @defaultValue 1 */
  seed?: number;
  /** Each class's weight in the loss (a learned cache's selector weighs false positives above false negatives); default all 1. */
  classWeights?: readonly number[];
  /** Rows to classify with the trained head, row-major [rows, featureCount]: its held-out test. */
  evaluate?: Float32Array;
}

export interface TrainedHead {
  /** Row-major [featureCount, classes]. */
  weights: Float32Array;
  bias: Float32Array;
  featureCount: number;
  classes: number;
  /** Mean cross-entropy over the last epoch. */
  loss: number;
  /** Which TensorFlow.js backend trained it: `tensorflow` (native), `wasm` or `cpu`. */
  backend: string;
  trainMs: number;
  /** The class the head gives each row of `evaluate`. */
  predictions?: Int32Array;
  /** The head's distribution for each row of `evaluate`, row-major [rows, classes]. */
  probabilities?: Float32Array;
}

type Tf = typeof TensorFlow;

let loaded: Promise<Tf> | undefined;

/** TensorFlow.js on the fastest backend that loads here. */
export function loadTensorFlow(): Promise<Tf> {
  loaded ??= (async () => {
    for (const native of ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node']) {
      try {
        return (await import(native)) as Tf;
      } catch {
        // Not installed (their install downloads libtensorflow): the next one.
      }
    }
    const tf = await import('@tensorflow/tfjs');
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    // The .wasm files ship in the package; without this it would fetch them from a CDN.
    const dist = dirname(createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm'));
    wasm.setWasmPaths(`${join(dist, '/')}`);
    if (!(await tf.setBackend('wasm').catch(() => false))) await tf.setBackend('cpu');
    await tf.ready();
    return tf;
  })();
  return loaded;
}

export async function trainHead(job: HeadJob): Promise<TrainedHead> {
  const { features, featureCount, labels, classes, learningRate = 0.01, batchSize = 256, seed = 1, minSteps = 100 } = job;
  const rows = labels.length;
  const epochs = Math.max(job.epochs ?? 20, Math.ceil(minSteps / Math.ceil(rows / batchSize)));
  if (rows === 0 || features.length !== rows * featureCount) {
    throw new RangeError(`trainHead: ${features.length} feature values for ${rows} labels of ${featureCount} features`);
  }
  const bad = labels.findIndex((l) => l < 0 || l >= classes);
  if (bad >= 0) throw new RangeError(`trainHead: label ${labels[bad]} of row ${bad} is outside 0..${classes - 1}`);
  if (job.classWeights && job.classWeights.length !== classes) throw new RangeError(`trainHead: ${job.classWeights.length} class weights for ${classes} classes`);
  const tf = await loadTensorFlow();
  const started = performance.now();
  const random = seededRandom(seed);
  const rowWeights = job.classWeights ? Float32Array.from(labels, (l) => job.classWeights![l]!) : undefined;
  const dense = denseLayer(tf, false);
  // A variable made of a tensor shares its memory, and the tensor would keep it: made in a tidy.
  const w = tf.tidy(() => tf.variable(tf.randomNormal([featureCount, classes], 0, 0.01, 'float32', seed)));
  const b = tf.tidy(() => tf.variable(tf.zeros([classes])));
  const optimizer = tf.train.adam(learningRate);
  const order = Array.from({ length: rows }, (_, i) => i);
  let loss = NaN;
  try {
    for (let epoch = 0; epoch < epochs; epoch++) {
      shuffle(order, random);
      let sum = 0;
      for (let start = 0; start < rows; start += batchSize) {
        const batch = order.slice(start, start + batchSize);
        const xb = tf.tensor2d(rowBatch(features, featureCount, batch), [batch.length, featureCount]);
        const yb = tf.tidy(() => tf.oneHot(tf.tensor1d(batch.map((row) => labels[row]!), 'int32'), classes));
        const wb = rowWeights ? tf.tensor1d(batch.map((row) => rowWeights[row]!)) : undefined;
        // Reading the loss waits for the step: only in the last epoch.
        const last = epoch === epochs - 1;
        const cost = optimizer.minimize(() => tf.losses.softmaxCrossEntropy(yb, dense(xb, w, b), wb) as Scalar, last);
        if (last) sum += ((await cost?.data())?.[0] ?? NaN) * batch.length;
        tf.dispose([xb, yb, ...(wb ? [wb] : []), ...(cost ? [cost] : [])]);
      }
      loss = sum / rows;
    }
    const trainMs = performance.now() - started;
    return {
      weights: (await w.data()) as Float32Array,
      bias: (await b.data()) as Float32Array,
      featureCount,
      classes,
      loss,
      backend: tf.getBackend(),
      trainMs,
      ...(job.evaluate ? await predict(tf, job.evaluate, featureCount, w, b) : {}),
    };
  } finally {
    tf.dispose([w, b]);
    optimizer.dispose();
  }
}

async function predict(tf: Tf, rows: Float32Array, featureCount: number, w: TensorFlow.Variable, b: TensorFlow.Variable): Promise<{ predictions: Int32Array; probabilities: Float32Array }> {
  const probabilities = tf.tidy(() => tf.softmax(tf.add(tf.matMul(tf.tensor2d(rows, [rows.length / featureCount, featureCount]), w), b)));
  const predicted = tf.argMax(probabilities, 1);
  try {
    return { predictions: Int32Array.from(await predicted.data()), probabilities: Float32Array.from(await probabilities.data()) };
  } finally {
    tf.dispose([probabilities, predicted]);
  }
}

export function shuffle(order: number[], random: () => number): void {
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
}
