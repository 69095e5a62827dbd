// A frame cache's selector learned on other footage, shipped beside the model, so that a new
// detector node answers unchanged frames from its first ones instead of running whole until its
// own streams have taught it a selector: GATI's offline exploration (a cache trained on validation
// data) before its online adaptation. The node's own selector replaces it once its pairs vouch
// for one. Made by `npm run frame-cache-prior`.
import { readFile, writeFile } from 'node:fs/promises';
import { ErrorCode, PanoptesError } from '../../core/index.js';
import type { FittedSelector } from './frame-cache.js';

/** A fitted selector, and what it was learned with: it serves only a cache reading the same tensor, on the same grid, at the same input size. */
export interface FramePrior extends FittedSelector {
  model: string;
  inputSize: number;
  tensor: string;
  grid: number;
  /** Pairs it was learned (three quarters) and measured (a quarter) on. */
  pairs: number;
  /** The footage, in words. */
  source: string;
}

const VERSION = 1;

/** Where a model's prior lives: beside its file. */
export const framePriorFile = (modelFile: string): string => `${modelFile.replace(/\.onnx$/, '')}.frame-cache-prior.json`;

export async function writeFramePrior(file: string, prior: FramePrior): Promise<void> {
  const { weights, bias, threshold, ...rest } = prior;
  await writeFile(file, `${JSON.stringify({ version: VERSION, ...rest, threshold: Number.isFinite(threshold) ? threshold : null, weights: [...weights], bias: [...bias] }, null, 1)}\n`);
}

/** The prior in `file`; undefined where there is none. A file that is there but malformed is an error that names it. */
export async function readFramePrior(file: string): Promise<FramePrior | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const bad = (why: string): PanoptesError => new PanoptesError(ErrorCode.ModelLoad, `${file}: ${why}; make it again with npm run frame-cache-prior`, { details: { file } });
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw bad(`not JSON (${(err as Error).message})`);
  }
  if (raw.version !== VERSION) throw bad(`version ${String(raw.version)}, expected ${VERSION}`);
  const { model, inputSize, tensor, grid, pairs, source, expectedHitRate, expectedAccuracy } = raw;
  if (typeof model !== 'string' || typeof tensor !== 'string' || typeof source !== 'string') throw bad('model, tensor and source must be strings');
  for (const [name, value] of Object.entries({ inputSize, grid, pairs })) {
    if (!Number.isInteger(value) || (value as number) <= 0) throw bad(`${name} must be a positive integer`);
  }
  const numbers = (name: string, value: unknown, length?: number): Float32Array => {
    if (!Array.isArray(value) || value.length === 0 || value.some((v) => typeof v !== 'number' || !Number.isFinite(v)) || (length !== undefined && value.length !== length)) {
      throw bad(`${name} must be ${length ?? 'some'} finite numbers`);
    }
    return Float32Array.from(value as number[]);
  };
  const bias = numbers('bias', raw.bias, 2);
  const weights = numbers('weights', raw.weights);
  if (weights.length % 2 !== 0) throw bad('weights must be [features, 2]');
  const threshold = raw.threshold === null ? Infinity : raw.threshold;
  for (const [name, value] of Object.entries({ threshold, expectedHitRate, expectedAccuracy })) {
    if (typeof value !== 'number' || !(value >= 0) || (name !== 'threshold' && value > 1)) throw bad(`${name} must be a number from 0${name === 'threshold' ? '' : ' to 1'}`);
  }
  return {
    model,
    inputSize: inputSize as number,
    tensor,
    grid: grid as number,
    pairs: pairs as number,
    source,
    weights,
    bias,
    threshold: threshold as number,
    expectedHitRate: expectedHitRate as number,
    expectedAccuracy: expectedAccuracy as number,
  };
}
