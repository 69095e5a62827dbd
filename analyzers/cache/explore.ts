import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { seededRandom } from '../../core/index.js';
import type { LoadedModel, ModelRuntime, NamedTensors, TensorData } from '../runtime/index.js';
import type { CacheHeadJob, TrainedCache } from '../training/index.js';
import { DEFAULT_ACCURACY_TARGET, MIN_VOUCHED_HITS, type CacheVariant } from './composition.js';
import { argMax, concat, copyFeeds, copyTensor, pick } from './tensors.js';
import { encodeLookupModel, LOOKUP_INPUT, type CacheWeights } from './lookup-model.js';
import { meanRunMs, type SegmentedModel } from './segmented-model.js';
import { defaultVariants, parameterCount, variantName, type HiddenShape, type VariantSpec } from './variant.js';

/**
 * GATI's exploration phase (§4.1, digest §2.4): one pass of the base model over the validation
 * inputs records every candidate layer's hidden output and the base's output distribution; for
 * each (layer, variant) a predictor and selector are trained on 80% and measured on the other
 * 20% (H, A against the base's top class), their lookup timed where lookups run (T) and their
 * memory counted (M); each segment of the base is timed too (L).
 */
export interface ExploreOptions {
  base: SegmentedModel;
  /** The validation inputs, as feeds of segment 0 (any batch size); or the pass over them, `recorded` already. */
  batches?: Iterable<NamedTensors> | AsyncIterable<NamedTensors>;
  recorded?: Recorded;
  /** The base model's class distribution per input, row-major [batch, classes], from its outputs. */
  probabilitiesOf(outputs: NamedTensors): Float32Array;
  /** The cache's classes: the base's most frequent top classes, this many at most; the rest are "other". @defaultValue 16 */
  maxClasses?: number;
  variantsOf?(shape: HiddenShape): VariantSpec[];
  /** Trains a variant (on the training thread). */
  train(job: CacheHeadJob): Promise<TrainedCache>;
  /** Where lookups run, to time them. */
  lookupRuntime: ModelRuntime;
  /** Where lookup models are written. */
  dir: string;
  /** One input of batch 1, to time the segments and lookups on. */
  timingFeeds(): NamedTensors;
  /** The model whole, timed beside its segments: what their times add up to beyond its own is what the cuts cost. Without it, a cut costs nothing. */
  whole?: LoadedModel;
  /** The precision each variant's selector threshold is calibrated to, where it can be. @defaultValue 0.97 */
  accuracyTarget?: number;
  /** Which share of the inputs measures the variants. @defaultValue 0.2 */
  heldOut?: number;
  /** @defaultValue 1 */
  seed?: number;
  /** Progress, after each variant. */
  onVariant?(variant: ExploredVariant, done: number, total: number): void;
  /** A variant that could not be trained or measured: exploration goes on without it (and fails where every one did). */
  onFailed?(failed: { layer: number; name: string; err: unknown }): void;
  /** Aborted, exploration fails before the next variant. */
  signal?: AbortSignal;
}

export interface ExploredVariant extends CacheVariant {
  readonly spec: VariantSpec;
  readonly weights: CacheWeights;
  /** Where the lookup model is written (a version retrained online is deleted once loaded). */
  readonly file: string;
  readonly trainMs: number;
  /** The selector's output from which a lookup is a hit. */
  readonly threshold: number;
}

export interface Exploration {
  /** The base's class of each cache class; the last is "other" (−1). */
  readonly baseClassOf: readonly number[];
  readonly shapes: readonly HiddenShape[];
  /** L_i, at batch 1: each segment's own time, its run's setup and hand-offs left out. */
  readonly segmentMs: readonly number[];
  /** What a run of the base costs beyond its segments' work: paid once more at each cached layer it stops at. */
  readonly stopMs: number;
  readonly variants: readonly ExploredVariant[];
  /** Inputs seen. */
  readonly inputs: number;
}

const shapeOf = (t: TensorData): HiddenShape => ({ channels: t.dims[1]!, height: t.dims[2]!, width: t.dims[3]! });

/** What one pass of the base over the validation inputs leaves: each layer's hidden outputs, and the base's distributions. */
export interface Recorded {
  readonly hidden: Float32Array[][];
  readonly distributions: Float32Array[];
  shapes: HiddenShape[];
}

export const emptyRecord = (base: SegmentedModel): Recorded => ({ hidden: base.layers.map(() => []), distributions: [], shapes: [] });

/** Adds a run of the base (`runAll`'s) to `recorded`. */
export function record(recorded: Recorded, run: { outputs: NamedTensors; hidden: TensorData[] }, probabilitiesOf: (outputs: NamedTensors) => Float32Array): void {
  run.hidden.forEach((t, layer) => recorded.hidden[layer]!.push(t.data as Float32Array));
  recorded.shapes = run.hidden.map(shapeOf);
  recorded.distributions.push(probabilitiesOf(run.outputs));
}

export async function exploreCaches(options: ExploreOptions): Promise<Exploration> {
  const { base, probabilitiesOf, train, lookupRuntime, dir, maxClasses = 16, heldOut = 0.2, seed = 1, variantsOf = defaultVariants, accuracyTarget = DEFAULT_ACCURACY_TARGET } = options;
  // One pass: the hidden outputs per layer, and the base's distributions.
  const recorded = options.recorded ?? emptyRecord(base);
  for await (const feeds of options.batches ?? []) record(recorded, await base.runAll(feeds), probabilitiesOf);
  const { hidden, shapes } = recorded;
  if (recorded.distributions.length === 0) throw new RangeError(`${base.name}: no inputs to explore caches on`);
  const probabilities = concat(recorded.distributions);
  const rows = hidden[0]!.reduce((n, batch) => n + batch.length, 0) / size(shapes[0]!);
  const baseClasses = probabilities.length / rows;
  const top = Array.from({ length: rows }, (_, r) => argMax(probabilities.subarray(r * baseClasses, (r + 1) * baseClasses)));
  const baseClassOf = [...frequent(top, maxClasses), -1];
  const targets = cacheTargets(probabilities, rows, baseClasses, baseClassOf);

  const random = seededRandom(seed);
  const order = Array.from({ length: rows }, (_, i) => i).sort(() => random() - 0.5);
  const testRows = order.slice(0, Math.round(rows * heldOut));
  const trainRows = order.slice(testRows.length);

  const measuredMs: number[] = [];
  let input: NamedTensors | TensorData = options.timingFeeds();
  for (let k = 0; k < base.segments; k++) {
    const feeds = input;
    const copy = (): NamedTensors | TensorData => ('dims' in feeds ? copyTensor(feeds as TensorData) : copyFeeds(feeds as NamedTensors));
    measuredMs.push(await base.timeSegment(k, copy, 10));
    const out = await base.runSegment(k, copy());
    input = out[base.layers[k] ?? ''] ?? input;
  }
  // Timed on the model's thread: each segment's time holds one run's setup, the whole model's one
  // too (not the hand-off to that thread and back, about as long as a small lookup's run).
  const { whole } = options;
  const wholeMs = whole && base.segments > 1 ? await meanRunMs(whole, options.timingFeeds, 10) : undefined;
  const stopMs = wholeMs === undefined ? 0 : Math.max(0, (measuredMs.reduce((a, b) => a + b, 0) - wholeMs) / (base.segments - 1));
  const segmentMs = measuredMs.map((ms) => Math.max(0, ms - stopMs));

  await mkdir(dir, { recursive: true });
  const classes = baseClassOf.length;
  const plan = base.layers.map((_, layer) => variantsOf(shapes[layer]!));
  const total = plan.flat().length;
  const variants: ExploredVariant[] = [];
  const failures: unknown[] = [];
  for (const [layer, specs] of plan.entries()) {
    const shape = shapes[layer]!;
    const all = concat(hidden[layer]!);
    hidden[layer] = [];
    for (const spec of specs) {
      options.signal?.throwIfAborted();
      const measure = async (): Promise<ExploredVariant> => {
        const trained = await train({
          variant: spec,
          shape,
          hidden: pick(all, trainRows, size(shape)),
          targets: pick(targets, trainRows, classes),
          classes,
          otherClass: classes - 1,
          seed,
          evaluate: pick(all, testRows, size(shape)),
        });
        const { predicted, hit } = trained.evaluation!;
        const answers = testRows.map((r, i) => ({ hit: predicted[i] === classes - 1 ? 0 : hit[i]!, right: baseClassOf[predicted[i]!] === top[r] }));
        const { threshold, hitRate, accuracy, hits } = calibrate(answers, accuracyTarget);
        const name = variantName(spec);
        const file = join(dir, `${base.name}.${layer}.${name.replace(/[(),]/g, '_')}.onnx`);
        await writeFile(file, encodeLookupModel(spec, shape, classes, trained.weights));
        const model = await lookupRuntime.load({ name: `${base.name}@${layer}:${name}`, file });
        const one: TensorData = { type: 'float32', data: all.slice(0, size(shape)), dims: [1, shape.channels, shape.height, shape.width] };
        const lookupMs = await meanRunMs(model, () => ({ [LOOKUP_INPUT]: copyTensor(one) }), 10).finally(async () => model.dispose());
        return {
          layer,
          name,
          spec,
          hitRate,
          accuracy,
          hits,
          heldOut: testRows.length,
          threshold,
          lookupMs,
          // Parameters and working memory: Table 4's memory is about twice the parameters' bytes.
          memoryBytes: 2 * 4 * parameterCount(spec, shape, classes),
          weights: trained.weights,
          file,
          trainMs: trained.trainMs,
        };
      };
      const explored = await measure().catch((err: unknown) => {
        failures.push(err);
        options.onFailed?.({ layer, name: variantName(spec), err });
        return undefined;
      });
      if (!explored) continue;
      variants.push(explored);
      options.onVariant?.(explored, variants.length + failures.length, total);
    }
  }
  if (variants.length === 0 && failures.length > 0) throw failures[0];
  return { baseClassOf, shapes, segmentMs, stopMs, variants, inputs: rows };
}

/** The thresholds a selector is calibrated over, unless told others. */
const THRESHOLDS = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99];

/**
 * The selector's threshold: the lowest of a grid at which at least `minHits` held-out hits are
 * at least `target` precise (`fallback` where none is: 0.5, the trained one, or the threshold a
 * retrained cache had), with the hit rate, precision and hits there (fewer hits are too few to
 * tell a precision of 97% from one of 80%).
 * The paper has only the asymmetric loss; this sets the trade-off where the filter needs it, on
 * the split that measures it, so H and A are somewhat optimistic.
 */
export function calibrate(
  answers: readonly { hit: number; right: boolean }[],
  target: number,
  { minHits = MIN_VOUCHED_HITS, fallback = 0.5, thresholds = THRESHOLDS }: { minHits?: number; fallback?: number; thresholds?: readonly number[] } = {},
): { threshold: number; hitRate: number; accuracy: number; hits: number } {
  const at = (threshold: number) => {
    const hits = answers.filter((a) => a.hit >= threshold);
    // No hits: no precision to speak of; it never passes the filter.
    return { threshold, hits: hits.length, hitRate: hits.length / Math.max(1, answers.length), accuracy: hits.length > 0 ? hits.filter((a) => a.right).length / hits.length : 0 };
  };
  for (const threshold of thresholds) {
    const measured = at(threshold);
    if (measured.hits >= minHits && measured.accuracy >= target) return measured;
  }
  return at(fallback);
}

/**
 * The base's distribution folded onto the cache's classes, keeping its top class on top: its
 * known classes, and "other" (the last) as the most likely class it does not know, normalised.
 * (Folding all the rest into "other" would make "other" the top wherever the base is unsure, as
 * an ImageNet model on a crop often is, though its top class is a known one.)
 */
export function cacheTargets(probabilities: Float32Array, rows: number, baseClasses: number, baseClassOf: readonly number[]): Float32Array {
  const classes = baseClassOf.length;
  const known = new Set(baseClassOf);
  const targets = new Float32Array(rows * classes);
  for (let r = 0; r < rows; r++) {
    const row = probabilities.subarray(r * baseClasses, (r + 1) * baseClasses);
    let other = 0;
    for (let c = 0; c < baseClasses; c++) if (!known.has(c)) other = Math.max(other, row[c]!);
    const folded = [...baseClassOf.slice(0, -1).map((c) => row[c]!), other];
    const sum = folded.reduce((a, b) => a + b, 0) || 1;
    folded.forEach((p, c) => (targets[r * classes + c] = p / sum));
  }
  return targets;
}

/** The `most` commonest values, commonest first. */
function frequent(values: readonly number[], most: number): number[] {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, most).map(([v]) => v);
}

const size = (shape: HiddenShape): number => shape.channels * shape.height * shape.width;
