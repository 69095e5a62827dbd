import type * as TensorFlow from '@tensorflow/tfjs';
import type { Tensor } from '@tensorflow/tfjs';

/**
 * What training needs done differently on TensorFlow.js' WebAssembly backend, which is slow at two
 * things every step would otherwise do (measured on a 2-core CPU, rows of 17,424 values): gathering
 * a minibatch's rows (36 ms for 32 rows, against well under 1 ms to copy them together in
 * JavaScript) and products with a transposed operand, as a dense layer's gradient takes them
 * (12 ms, against 3.6 ms transposing first and 1.2 ms for the forward product).
 */

type Tf = typeof TensorFlow;

/** Rows `rows` of the row-major `source`, copied together. */
export function rowBatch(source: Float32Array, rowSize: number, rows: readonly number[]): Float32Array {
  const batch = new Float32Array(rows.length * rowSize);
  rows.forEach((row, i) => batch.set(source.subarray(row * rowSize, (row + 1) * rowSize), i * rowSize));
  return batch;
}

export type Dense = (x: Tensor, w: Tensor, b: Tensor) => Tensor;

/**
 * x·W + b with its gradient taken by plain products of transposed copies. Where x is data (the
 * rows, or features of layers kept as they are), `inputGradient` false gives it zeros instead.
 */
export function denseLayer(tf: Tf, inputGradient: boolean): Dense {
  const op = tf.customGrad(((x: Tensor, w: Tensor, b: Tensor, save: TensorFlow.GradSaveFunc) => {
    save([x, w]);
    return {
      value: tf.add(tf.matMul(x, w), b),
      gradFunc: (dy: Tensor, [xs, ws]: Tensor[]) => [
        inputGradient ? tf.matMul(dy, tf.transpose(ws!)) : tf.zerosLike(xs!),
        tf.matMul(tf.transpose(xs!), dy),
        tf.sum(dy, 0),
      ],
    };
  }) as unknown as Parameters<Tf['customGrad']>[0]);
  return op as Dense;
}

/**
 * `fn` over the row-major `source` ([rows, ...rowDims]) a chunk of rows at a time, its outputs
 * ([chunk, ...]) read back and joined row-major: a few hundred rows of an early layer's output
 * would not fit the backend's memory at once.
 */
export async function mapRows(tf: Tf, source: Float32Array, rowDims: readonly number[], fn: (x: Tensor) => Tensor, chunk = 32): Promise<Float32Array> {
  const rowSize = rowDims.reduce((a, b) => a * b, 1);
  const rows = source.length / rowSize;
  const parts: Float32Array[] = [];
  for (let start = 0; start < rows; start += chunk) {
    const count = Math.min(chunk, rows - start);
    const out = tf.tidy(() => fn(tf.tensor(source.subarray(start * rowSize, (start + count) * rowSize), [count, ...rowDims])));
    try {
      parts.push((await out.data()) as Float32Array);
    } finally {
      out.dispose();
    }
  }
  const joined = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  parts.reduce((at, p) => (joined.set(p, at), at + p.length), 0);
  return joined;
}
