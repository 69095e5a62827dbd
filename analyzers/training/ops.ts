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
 * rows, or features of layers kept as they are), `inputGradient` false gives it none.
 */
export function denseLayer(tf: Tf, inputGradient: boolean): Dense {
  const op = tf.customGrad(((x: Tensor, w: Tensor, b: Tensor, save: TensorFlow.GradSaveFunc) => {
    save([x, w]);
    return {
      value: tf.add(tf.matMul(x, w), b),
      gradFunc: (dy: Tensor, [xs, ws]: Tensor[]) => [
        // Data's gradient is never read: a scalar, which the engine would refuse were it read.
        inputGradient ? tf.matMul(dy, tf.transpose(ws!)) : tf.zeros([]),
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

/** Conv over NCHW `x` with filter `w` [O, C, k, k] and bias `b` [O], padding ⌊k/2⌋, where no gradient is taken: the backend's own kernel. Output NHWC [n, H', W', O]. */
export function convForward(tf: Tf, x: Tensor, w: Tensor, b: Tensor, stride: number): Tensor {
  const pad = Math.floor(w.shape[2]! / 2);
  const filter = tf.transpose(w, [2, 3, 1, 0]) as TensorFlow.Tensor4D;
  return tf.add(tf.conv2d(tf.transpose(x, [0, 2, 3, 1]) as TensorFlow.Tensor4D, filter, stride, [[0, 0], [pad, pad], [pad, pad], [0, 0]]), b);
}

/**
 * The same conv as one matrix product of the k² shifted slices (im2col) with the filter, for
 * training it: the WebAssembly backend has no gradient for conv2d's filter, and slices and
 * products have one (more than ten times slower than `convForward`). The patches are `x`'s own
 * values, so `dense` (which takes the product) need give them no gradient.
 */
export function convBySlices(tf: Tf, x: Tensor, w: Tensor, b: Tensor, stride: number, dense: Dense): Tensor {
  const [outputs, , kernel] = w.shape as [number, number, number, number];
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
  const filter = tf.reshape(tf.transpose(w, [2, 3, 1, 0]), [kernel * kernel * channels, outputs]);
  return tf.reshape(dense(patches, filter, b), [n, outH, outW, outputs]);
}
