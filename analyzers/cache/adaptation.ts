import { join } from 'node:path';
import type { LoadedModel, ModelRuntime, NamedTensors } from '../runtime/index.js';
import type { CacheHeadJob, TrainedCache } from '../training/index.js';
import type { CachedAnswer, CachedModel, EnabledCache } from './cached-model.js';
import { effectiveHitRates, DEFAULT_ACCURACY_TARGET } from './composition.js';
import { cacheTargets, calibrate, type Exploration, type ExploredVariant } from './explore.js';
import { encodeFrozenModel, encodeLookupModel, loadWritten, LOOKUP_FEATURES, LOOKUP_HIT, LOOKUP_INPUT, LOOKUP_PROBABILITIES } from './lookup-model.js';
import type { SegmentedModel } from './segmented-model.js';
import { argMax } from './tensors.js';
import { variantName } from './variant.js';

/**
 * GATI's online adaptation (§5.3, digest §2.7): of each group of requests a share is sampled
 * into a sliding window, labelled by a run of the base model off the request's path; the enabled
 * variants are fine-tuned (lr 0.002, 5 epochs) on the window and the original inputs (against
 * forgetting) every `period` requests, or at the end of a group whose hit rate fell below
 * `lagging` × the expected one; each selector's threshold is calibrated again on the window's
 * newest fifth and half the original inputs (kept where they have too few hits to vouch for
 * another); the new set swaps in whole. A retrained version that cannot vouch for its hits on
 * those inputs leaves the one serving in place if that one can (at its threshold calibrated
 * again), and otherwise the variant stops serving: no cache below the accuracy filter answers. Fine-tuning retrains the predictor's last layer and the selector, the layers
 * below kept, so their output for a request is computed once, by onnxruntime on the lookup
 * runtime, and kept with it (the paper retrains whole predictors in ~480 ms on a GPU; here a Conv
 * predictor's lower layer alone, trained, takes seconds a retraining on a CPU core). The window, period and shares are the paper's scaled
 * down (its 100-request groups with 20% sampled, a 60-minute window, a 15-minute period).
 */
export interface CacheAdaptationOptions {
  model: CachedModel;
  base: SegmentedModel;
  /** The enabled variants, as exploration left them, in the order of `model`'s caches. */
  variants: readonly ExploredVariant[];
  exploration: Pick<Exploration, 'baseClassOf' | 'shapes'>;
  probabilitiesOf(outputs: NamedTensors): Float32Array;
  train(job: CacheHeadJob): Promise<TrainedCache>;
  lookupRuntime: ModelRuntime;
  /** Where retrained lookup models are written. */
  dir: string;
  random: () => number;
  /** @defaultValue 100 */
  group?: number;
  /** @defaultValue 20 */
  sampled?: number;
  /** Samples kept. @defaultValue 300 */
  window?: number;
  /** Requests between retrainings. @defaultValue 200 */
  period?: number;
  /** @defaultValue 0.8 */
  lagging?: number;
  /** Samples needed before a first retraining. @defaultValue 50 */
  minSamples?: number;
  /** @defaultValue 0.97 */
  accuracyTarget?: number;
  /** The lookup models of the caches `model` starts with become the adaptation's own, disposed when swapped out. */
  ownsInitialCaches?: boolean;
}

export interface CacheAdaptation {
  /** Adds an input of the original (exploration) set, mixed into every retraining. */
  remember(feeds: NamedTensors): Promise<void>;
  /** The same, from a run of the base recorded already: its hidden output per layer and its distribution. */
  rememberRun(hidden: readonly Float32Array[], probabilities: Float32Array): void;
  /**
   * After each request, in order: samples it, and retrains when due (resolving once the new caches
   * serve). Resolves with the base's class of a sampled request, which checks a hit's answer.
   * Calls must not overlap each other or `close` (the classifier cache chains them): a retraining
   * uses the frozen models that closing disposes.
   */
  observe(feeds: () => NamedTensors, answered: CachedAnswer): Promise<number | undefined>;
  /**
   * `variants`: those serving now, with the hit rate and precision of their last calibration (none
   * once every one has been disabled); `rejected`: retrained versions kept out for missing the
   * accuracy target on the window; `disabled`: variants that stopped serving because neither
   * their retrained version nor the serving one met it.
   */
  status(): { retrains: number; meanRetrainMs: number; samples: number; rejected: number; disabled: number; variants: readonly ExploredVariant[] };
  /** Disposes the lookup models it loaded (those of lookups still running, once they end). */
  close(): Promise<void>;
}

interface Row {
  hidden: Float32Array[];
  targets: Float32Array;
  label: number;
  /** By variant (`keyOf`): what its frozen layers give for this row, kept once computed. */
  frozen: Map<string, Float32Array>;
}

/** Names a variant for as long as it serves: retraining keeps its frozen layers as they are. */
const keyOf = (v: ExploredVariant): string => `${v.layer}/${v.name}`;

/** Rows per run of a frozen model: small runs, so that request batches on the same runtime get in between. */
const FROZEN_CHUNK = 16;

export function createCacheAdaptation(options: CacheAdaptationOptions): CacheAdaptation {
  const { model, base, exploration, train, lookupRuntime, dir, random, probabilitiesOf } = options;
  const { group = 100, sampled = 20, window: windowSize = 300, period = 200, lagging = 0.8, minSamples = 50, accuracyTarget = DEFAULT_ACCURACY_TARGET } = options;
  const classes = exploration.baseClassOf.length;
  /** The serving set's expected hit rate: a group below `lagging` of it retrains early. */
  const expectedOf = (variants: readonly ExploredVariant[]) => effectiveHitRates(variants).reduce((a, b) => a + b, 0);
  let expectedHitRate = expectedOf(options.variants);
  const original: Row[] = [];
  const window: Row[] = [];
  let current = [...options.variants];
  let sampledInGroup = new Set<number>();
  let [requests, hitsInGroup, lastRetrain, retrains, trainMs, trainedVariants, rejected, disabled] = [0, 0, 0, 0, 0, 0, 0, 0];
  /** Lookup models this adaptation loaded (or was given) and still owns. */
  const loaded: LoadedModel[] = options.ownsInitialCaches ? model.caches.map((c) => c.model) : [];
  /** By variant: its frozen layers as a model of their own, loaded at its first retraining. */
  const frozenModels = new Map<string, Promise<LoadedModel>>();

  const rowFrom = (hidden: readonly Float32Array[], probabilities: Float32Array): Row => ({
    hidden: [...hidden],
    targets: cacheTargets(probabilities, 1, probabilities.length, exploration.baseClassOf),
    label: argMax(probabilities),
    frozen: new Map(),
  });
  const rowOf = async (feeds: NamedTensors): Promise<Row> => {
    const run = await base.runAll(feeds);
    return rowFrom(run.hidden.map((t) => t.data as Float32Array), probabilitiesOf(run.outputs));
  };
  const stack = (rows: readonly Row[], pick: (row: Row) => Float32Array): Float32Array => {
    const width = rows.length > 0 ? pick(rows[0]!).length : 0;
    const out = new Float32Array(rows.length * width);
    rows.forEach((r, i) => out.set(pick(r), i * width));
    return out;
  };

  /** A lookup's answers on `rows`, as calibration reads them: its selector's output (0 where it says "other") and whether its class is the base's. */
  const answersOf = (rows: readonly Row[], predicted: ArrayLike<number>, hit: ArrayLike<number>) =>
    rows.map((r, i) => ({ hit: predicted[i] === classes - 1 ? 0 : hit[i]!, right: exploration.baseClassOf[predicted[i]!] === r.label }));

  /** The serving version of a cache on `rows`: what its lookup model answers there. */
  async function servingAnswers(cache: EnabledCache, rows: readonly Row[]) {
    const shape = exploration.shapes[cache.layer]!;
    const out = await cache.model.run({ [LOOKUP_INPUT]: { type: 'float32', data: stack(rows, (r) => r.hidden[cache.layer]!), dims: [rows.length, shape.channels, shape.height, shape.width] } });
    const probabilities = out[LOOKUP_PROBABILITIES]!.data as Float32Array;
    const predicted = rows.map((_, i) => argMax(probabilities.subarray(i * classes, (i + 1) * classes)));
    return answersOf(rows, predicted, out[LOOKUP_HIT]!.data as Float32Array);
  }

  /** What `v`'s frozen layers give for each of `rows`, stacked; computed (on the lookup runtime) only for rows that have not had it yet. */
  async function frozenFeatures(v: ExploredVariant, rows: readonly Row[]): Promise<Float32Array> {
    const key = keyOf(v);
    const missing = rows.filter((r) => !r.frozen.has(key));
    if (missing.length > 0) {
      const shape = exploration.shapes[v.layer]!;
      let frozen = frozenModels.get(key);
      if (!frozen) {
        const file = join(dir, `${base.name}.${v.layer}.${variantName(v.spec).replace(/[(),]/g, '_')}.frozen.onnx`);
        const loading = loadWritten(lookupRuntime, file, file, encodeFrozenModel(v.spec, shape, classes, v.weights)).catch((err: unknown) => {
          // Loaded again at the next retraining.
          if (frozenModels.get(key) === loading) frozenModels.delete(key);
          throw err;
        });
        frozenModels.set(key, (frozen = loading));
      }
      const frozenModel = await frozen;
      for (let start = 0; start < missing.length; start += FROZEN_CHUNK) {
        const chunk = missing.slice(start, start + FROZEN_CHUNK);
        const out = await frozenModel.run({ [LOOKUP_INPUT]: { type: 'float32', data: stack(chunk, (r) => r.hidden[v.layer]!), dims: [chunk.length, shape.channels, shape.height, shape.width] } });
        const features = out[LOOKUP_FEATURES]!.data as Float32Array;
        const width = features.length / chunk.length;
        chunk.forEach((r, i) => r.frozen.set(key, features.slice(i * width, (i + 1) * width)));
      }
    }
    return stack(rows, (r) => r.frozen.get(key)!);
  }

  async function retrain(): Promise<void> {
    // Calibrated on the window's newest fifth and half the original inputs, trained on the rest.
    const newest = window.slice(-Math.round(window.length / 5));
    const half = Math.floor(original.length / 2);
    const calibration = [...newest, ...original.slice(half)];
    const training = [...window.slice(0, window.length - newest.length), ...original.slice(0, half)];
    /** Each variant kept, with the lookup model it serves on: its retrained version's, or the one serving. */
    const next: { variant: ExploredVariant; serving: EnabledCache }[] = [];
    /** The versions this retraining loaded. */
    const fresh: LoadedModel[] = [];
    try {
      for (const [i, v] of current.entries()) {
        const started = performance.now();
        const [features, evaluate] = [await frozenFeatures(v, training), await frozenFeatures(v, calibration)];
        const frozenMs = performance.now() - started;
        const trained = await train({
          variant: v.spec,
          shape: exploration.shapes[v.layer]!,
          features,
          targets: stack(training, (r) => r.targets),
          classes,
          otherClass: classes - 1,
          epochs: 5,
          minSteps: 30,
          learningRate: 0.002,
          retrain: 'head',
          init: Object.fromEntries(Object.entries(v.weights).map(([name, w]) => [name, w.slice()])),
          evaluate,
        });
        trainMs += frozenMs + trained.trainMs;
        trainedVariants += 1;
        const { predicted, hit } = trained.evaluation!;
        const { threshold, hitRate, accuracy } = calibrate(answersOf(calibration, predicted, hit), accuracyTarget, { fallback: v.threshold });
        if (accuracy >= accuracyTarget) {
          const file = join(dir, `${base.name}.${v.layer}.${variantName(v.spec).replace(/[(),]/g, '_')}.v${retrains + 1}.onnx`);
          const lookup = await loadWritten(lookupRuntime, file, file, encodeLookupModel(v.spec, exploration.shapes[v.layer]!, classes, trained.weights));
          loaded.push(lookup);
          fresh.push(lookup);
          next.push({ variant: { ...v, weights: trained.weights, threshold, hitRate, accuracy, file }, serving: { layer: v.layer, variant: v.name, model: lookup, baseClassOf: exploration.baseClassOf, threshold } });
          continue;
        }
        // A version that cannot vouch for its hits on the newest inputs does not replace the one
        // serving. That one goes on at a threshold calibrated again where it can vouch, as it is
        // where its hits are too few to say, and not at all where they rule the target out.
        rejected += 1;
        const serving = model.caches[i]!;
        const answers = await servingAnswers(serving, calibration);
        const recalibrated = calibrate(answers, accuracyTarget, { fallback: v.threshold });
        if (recalibrated.accuracy >= accuracyTarget) {
          next.push({ variant: { ...v, ...recalibrated }, serving: { ...serving, threshold: recalibrated.threshold } });
          continue;
        }
        const hits = answers.filter((a) => a.hit >= v.threshold);
        if (belowTarget(hits.length, hits.filter((a) => !a.right).length, accuracyTarget)) disabled += 1;
        else next.push({ variant: v, serving });
      }
    } catch (err) {
      // The versions this retraining loaded go with it.
      await Promise.allSettled(fresh.filter(release).map(async (lookup) => lookup.dispose()));
      throw err;
    }
    const caches = next.map((n) => n.serving);
    const swappedOut = model.caches.filter((c) => !caches.some((kept) => kept.model === c.model));
    model.swap(caches);
    // Disposed once no lookup still runs on them.
    for (const c of swappedOut) if (release(c.model)) await model.retire(c.model);
    current = next.map((n) => n.variant);
    expectedHitRate = expectedOf(current);
    retrains += 1;
    await disposeFrozen((key) => !current.some((v) => keyOf(v) === key));
  }

  /** Frozen models no longer needed; one that fails to go is not worth failing a retraining or a close for. */
  async function disposeFrozen(which: (key: string) => boolean): Promise<void> {
    const gone = [...frozenModels.keys()].filter(which);
    const models = gone.map((key) => frozenModels.get(key)!);
    for (const key of gone) frozenModels.delete(key);
    await Promise.allSettled(models.map(async (m) => (await m).dispose()));
  }

  /** Whether this adaptation loaded `lookup`; it no longer counts it as its own. */
  function release(lookup: LoadedModel): boolean {
    const at = loaded.indexOf(lookup);
    if (at >= 0) loaded.splice(at, 1);
    return at >= 0;
  }

  return {
    async remember(feeds) {
      original.push(await rowOf(feeds));
    },
    rememberRun(hidden, probabilities) {
      original.push(rowFrom(hidden, probabilities));
    },
    async observe(feeds, answered) {
      const i = requests++;
      if (answered.exit !== 'full') hitsInGroup += 1;
      if (i % group === 0) sampledInGroup = new Set(Array.from({ length: group }, (_, k) => k).sort(() => random() - 0.5).slice(0, sampled));
      let label: number | undefined;
      if (sampledInGroup.has(i % group)) {
        const row = await rowOf(feeds());
        label = row.label;
        window.push(row);
        if (window.length > windowSize) window.shift();
      }
      if (i % group !== group - 1) return label;
      const behind = hitsInGroup / group < lagging * expectedHitRate;
      hitsInGroup = 0;
      if (current.length > 0 && window.length >= minSamples && (i + 1 - lastRetrain >= period || behind)) {
        lastRetrain = i + 1;
        await retrain();
      }
      return label;
    },
    status: () => ({ retrains, meanRetrainMs: trainedVariants === 0 ? 0 : trainMs / trainedVariants, samples: window.length, rejected, disabled, variants: current }),
    async close() {
      // Those serving once no lookup runs on them; any other (a retraining that failed between
      // loading and swapping in) at once.
      try {
        for (const c of model.caches) if (release(c.model)) await model.retire(c.model);
      } finally {
        try {
          await Promise.all(loaded.splice(0).map((lookup) => lookup.dispose()));
        } finally {
          await disposeFrozen(() => true);
        }
      }
    },
  };
}

/**
 * Whether `wrong` wrong answers among `hits` rule out an accuracy of `target` at 95% confidence:
 * a cache that met it would answer that many wrong less than once in twenty times.
 */
export function belowTarget(hits: number, wrong: number, target: number): boolean {
  const p = 1 - target;
  // P(fewer than `wrong` wrong answers) for a cache exactly at the target.
  let below = 0;
  let term = (1 - p) ** hits;
  for (let k = 0; k < wrong; k++) {
    below += term;
    term *= ((hits - k) / (k + 1)) * (p / (1 - p));
  }
  return wrong > 0 && 1 - below < 0.05;
}
