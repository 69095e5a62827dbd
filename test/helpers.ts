/** Small helpers shared by tests. */
import { expect } from 'vitest';
import type { RgbImage, TensorData } from '../analyzers/index.js';
import { createServer, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createLogger, PanoptesError, seededRandom, type Logger } from '../core/index.js';

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
export function capturingLogger(level: 'warn' | 'info' = 'warn'): { logger: Logger; warnings: string[]; messages: string[]; errors: string[] } {
  const warnings: string[] = [];
  const messages: string[] = [];
  /** The messages of the errors logged with them. */
  const errors: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const line = JSON.parse(chunk.toString()) as { level: number; msg: string; err?: { message?: string } };
      if (line.level === 40) warnings.push(line.msg);
      messages.push(line.msg);
      if (line.err?.message) errors.push(line.err.message);
      done();
    },
  });
  return { logger: createLogger({ level, destination }), warnings, messages, errors };
}

/**
 * Rows of features around random class centres, as a network's feature layer might give a
 * labelled pool: row r is of class `classOf(r)`. The centres come from `centreSeed`, the rows'
 * noise from `seed`, so more rows with the same seeds extend the same pool.
 */
export function clusteredFeatures(options: {
  rows: number;
  featureCount: number;
  classes: number;
  classOf: (row: number) => number;
  seed: number;
  centreSeed: number;
  centreScale?: number;
  spread?: number;
}): { features: Float32Array; labels: Int32Array } {
  const { rows, featureCount, classes, classOf, centreScale = 1, spread = 1 } = options;
  const gaussian = (random: () => number) => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const centreRandom = seededRandom(options.centreSeed);
  const centres = Array.from({ length: classes }, () => Float32Array.from({ length: featureCount }, () => centreScale * gaussian(centreRandom)));
  const random = seededRandom(options.seed);
  const features = new Float32Array(rows * featureCount);
  const labels = Int32Array.from({ length: rows }, (_, r) => classOf(r));
  labels.forEach((label, r) => {
    for (let f = 0; f < featureCount; f++) features[r * featureCount + f] = centres[label]![f]! + spread * gaussian(random);
  });
  return { features, labels };
}

/** A TCP port on 127.0.0.1 nobody listens on now (a random one may be a client's ephemeral port). */
export function freePort(): Promise<number> {
  const server = createServer();
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
