/** Small helpers shared by tests. */
import { expect } from 'vitest';
import type { RgbImage, TensorData } from '../analyzers/index.js';
import { Writable } from 'node:stream';
import { createLogger, PanoptesError, type Logger } from '../core/index.js';

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

/** A logger whose warnings a test can read. */
export function capturingLogger(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const line = JSON.parse(chunk.toString()) as { level: number; msg: string };
      if (line.level === 40) warnings.push(line.msg);
      done();
    },
  });
  return { logger: createLogger({ level: 'warn', destination }), warnings };
}
