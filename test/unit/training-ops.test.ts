import type { Tensor } from '@tensorflow/tfjs';
import { describe, expect, it } from 'vitest';
import { loadTensorFlow } from '../../analyzers/training/index.js';
import { convBySlices, convForward, denseLayer, mapRows, rowBatch } from '../../analyzers/training/ops.js';
import { seededRandom } from '../../core/index.js';

/** TensorFlow.js' operations as training does them on the WebAssembly backend, against TensorFlow.js' own. */

const random = seededRandom(4);
const values = (n: number): Float32Array => Float32Array.from({ length: n }, () => random() * 2 - 1);
const maxDifference = async (a: Tensor, b: Tensor): Promise<number> => {
  const [x, y] = [await a.data(), await b.data()];
  expect(a.shape).toEqual(b.shape);
  return Math.max(...Array.from(x, (v, i) => Math.abs(v - y[i]!)));
};

describe('training operations', () => {
  it.each([
    [3, 1, 7, 7],
    [3, 2, 8, 6],
    [5, 1, 6, 9],
    [5, 2, 9, 8],
  ])("the conv trained by slices is the backend's conv (k %i, stride %i, %i×%i)", async (kernel, stride, height, width) => {
    const tf = await loadTensorFlow();
    const x = tf.tensor4d(values(2 * 3 * height * width), [2, 3, height, width]);
    const w = tf.tensor4d(values(4 * 3 * kernel * kernel), [4, 3, kernel, kernel]);
    const b = tf.tensor1d(values(4));
    const [sliced, forward] = [convBySlices(tf, x, w, b, stride, denseLayer(tf, false)), convForward(tf, x, w, b, stride)];
    expect(await maxDifference(sliced, forward)).toBeLessThan(1e-4);
    tf.dispose([x, w, b, sliced, forward]);
  });

  it.each([true, false])("a dense layer's gradients are the plain product's (input's gradient: %s)", async (inputGradient) => {
    const tf = await loadTensorFlow();
    const [x, w, b] = [tf.tensor2d(values(5 * 7), [5, 7]), tf.tensor2d(values(7 * 3), [7, 3]), tf.tensor1d(values(3))];
    const dense = denseLayer(tf, inputGradient);
    const loss = (f: (x: Tensor, w: Tensor, b: Tensor) => Tensor) => (xs: Tensor, ws: Tensor, bs: Tensor) => tf.sum(tf.square(f(xs, ws, bs)));
    const plain = tf.grads(loss((xs, ws, bs) => tf.add(tf.matMul(xs, ws), bs)))([x, w, b]);
    // Gradients for W and b only where x is data.
    const ours = inputGradient ? tf.grads(loss(dense))([x, w, b]) : tf.grads((ws: Tensor, bs: Tensor) => loss(dense)(x, ws, bs))([w, b]);
    const expected = inputGradient ? plain : plain.slice(1);
    for (const [i, g] of ours.entries()) expect(await maxDifference(g, expected[i]!)).toBeLessThan(1e-4);
    tf.dispose([x, w, b, ...plain, ...ours]);
  });

  it('copies rows together, and maps a function over rows a chunk at a time as over all at once', async () => {
    const tf = await loadTensorFlow();
    const rows = values(5 * 4);
    expect([...rowBatch(rows, 4, [3, 0])]).toEqual([...rows.subarray(12, 16), ...rows.subarray(0, 4)]);
    const double = (t: Tensor) => tf.mul(tf.sum(t, 1), 2);
    const whole = tf.tidy(() => double(tf.tensor2d(rows, [5, 4])));
    expect([...(await mapRows(tf, rows, [4], double, 2))]).toEqual([...(await whole.data())]);
    whole.dispose();
  });
});
