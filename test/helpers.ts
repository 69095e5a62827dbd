/** Small helpers shared by tests. */
import { expect } from 'vitest';
import type { RgbImage, TensorData } from '../analyzers/index.js';
import { PanoptesError } from '../core/index.js';

/** Runs `fn`, expecting a PanoptesError, and returns it. */
export function thrown(fn: () => unknown): PanoptesError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PanoptesError);
    return err as PanoptesError;
  }
  throw new Error('expected an error, none was thrown');
}

/** An image of one colour. */
export function solid(width: number, height: number, rgb: [number, number, number]): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) data.set(rgb, i * 3);
  return { width, height, data };
}

export function f32(t: TensorData): Float32Array {
  if (!(t.data instanceof Float32Array)) throw new Error('expected float32');
  return t.data;
}
