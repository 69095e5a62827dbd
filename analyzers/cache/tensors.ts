import type { NamedTensors, TensorData } from '../runtime/index.js';

/** Small helpers on flat arrays and tensors that the cache's modules share. */

export function argMax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

export function concat(parts: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** Rows `rows` of a row-major array of rows of `width`. */
export function pick(values: Float32Array, rows: readonly number[], width: number): Float32Array {
  const out = new Float32Array(rows.length * width);
  rows.forEach((r, i) => out.set(values.subarray(r * width, (r + 1) * width), i * width));
  return out;
}

/** A copy to hand to a runtime, which takes ownership of what it is given. */
// A Node Buffer's slice() is a view of the same memory: a Uint8Array is copied by its constructor.
export const copyTensor = (t: TensorData): TensorData => ({ ...t, data: t.data instanceof Uint8Array ? new Uint8Array(t.data) : t.data.slice() });

export const copyFeeds = (feeds: NamedTensors): NamedTensors => Object.fromEntries(Object.entries(feeds).map(([name, t]) => [name, copyTensor(t)]));

/** Row `row` of each tensor of a batch, as a batch of one, copied out of the batch's buffers. */
export const rowOf = (tensors: NamedTensors, row: number): NamedTensors =>
  Object.fromEntries(
    Object.entries(tensors).map(([name, t]) => {
      const width = t.data.length / t.dims[0]!;
      return [name, { ...t, dims: [1, ...t.dims.slice(1)], data: t.data.slice(row * width, (row + 1) * width) as TensorData['data'] }];
    }),
  );
