// A frame cache's selector learned on other footage, shipped beside the model, so that a new
// detector node answers unchanged frames from its first ones instead of running whole until its
// own streams have taught it a selector: GATI's offline exploration (a cache trained on validation
// data) before its online adaptation. The node's own selector replaces it once its pairs vouch
// for one. Made by `npm run frame-cache-prior`.
import { readFile, writeFile } from 'node:fs/promises';
import { ErrorCode, PanoptesError } from '../../core/index.js';
import type { FittedSelector } from './frame-selector.js';

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
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw bad(`not JSON (${(err as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw bad('not a JSON object');
  const raw = parsed as Record<string, unknown>;
  if (raw.version !== VERSION) throw bad(`version ${String(raw.version)}, expected ${VERSION}`);
  const { model, inputSize, tensor, grid, pairs, source, expectedHitRate, expectedAccuracy } = raw;
  if (typeof model !== 'string' || typeof tensor !== 'string' || typeof source !== 'string') throw bad('model, tensor and source must be strings');
  for (const [name, value] of Object.entries({ inputSize, grid, pairs })) {
    if (!Number.isInteger(value) || (value as number) <= 0) throw bad(`${name} must be a positive integer`);
  }
  // Finite as float32 too: 1e39 is a finite number in JSON and infinite in the selector.
  const numbers = (name: string, value: unknown, length?: number): Float32Array => {
    const values = Array.isArray(value) && value.every((v) => typeof v === 'number') ? Float32Array.from(value as number[]) : undefined;
    if (!values || values.length === 0 || values.some((v) => !Number.isFinite(v)) || (length !== undefined && values.length !== length)) {
      throw bad(`${name} must be ${length ?? 'some'} finite float32 numbers`);
    }
    return values;
  };
  const bias = numbers('bias', raw.bias, 2);
  const weights = numbers('weights', raw.weights);
  if (weights.length % 2 !== 0) throw bad('weights must be [features, 2]');
  // A selector's threshold is one of calibrate's, from 0.5; null where it could not vouch (it never answers).
  const threshold = raw.threshold === null ? Infinity : raw.threshold;
  if (threshold !== Infinity && !(typeof threshold === 'number' && threshold >= 0.5 && threshold <= 1)) throw bad('threshold must be a number from 0.5 to 1, or null');
  for (const [name, value] of Object.entries({ expectedHitRate, expectedAccuracy })) {
    if (typeof value !== 'number' || !(value >= 0 && value <= 1)) throw bad(`${name} must be a number from 0 to 1`);
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
