import type { LoadedModel, NamedTensors, TensorData } from '../runtime/index.js';
import { LOOKUP_HIT, LOOKUP_INPUT, LOOKUP_PROBABILITIES } from './lookup-model.js';
import type { SegmentedModel } from './segmented-model.js';
import { argMax, copyTensor } from './tensors.js';

/**
 * A base model with learned caches on some of its hidden layers (GATI §4.3, digest §2.6): the
 * base runs segment by segment; after a cached layer its hidden output goes to that cache's
 * lookup; a hit answers the request there and the rest of the base is skipped. Asynchronous
 * lookups run beside the base (on another runtime: other cores) while it goes on, at most one in
 * flight per request; synchronous ones make the base wait, for comparison.
 */
export interface EnabledCache {
  /** Reads the hidden output of segment `layer`. */
  readonly layer: number;
  readonly variant: string;
  /** The lookup model (predictor and selector), loaded where lookups run. */
  readonly model: LoadedModel;
  /** The base model's class for each of the cache's classes; −1 for "other", which never answers. */
  readonly baseClassOf: readonly number[];
  /** The selector's output from which a lookup is a hit. @defaultValue 0.5 */
  readonly threshold?: number;
}

export interface CachedAnswer {
  /** The base model's class index of the answer. */
  readonly answer: number;
  /** The layer whose cache answered, or `full` when the base ran to its end. */
  readonly exit: number | 'full';
  readonly variant?: string;
  /** The base model's own outputs, where it ran to the end. */
  readonly outputs?: NamedTensors;
}

export interface CachedModel {
  run(feeds: NamedTensors): Promise<CachedAnswer>;
  /** Replaces the caches at once: a request uses the set it started with (retrained caches swap in whole). */
  swap(caches: readonly EnabledCache[]): void;
  readonly caches: readonly EnabledCache[];
}

export interface CachedModelOptions {
  base: SegmentedModel;
  caches: readonly EnabledCache[];
  /** @defaultValue 'async' */
  mode?: 'async' | 'sync';
  /** The base model's answer (a class index) from its outputs. */
  answerOf(outputs: NamedTensors): number;
  /** A lookup failed (the request goes on as a miss). */
  onLookupError?(err: unknown, cache: EnabledCache): void;
}


/** Never settles: a race against it waits for the other side. */
const never = new Promise<never>(() => undefined);

export function createCachedModel(options: CachedModelOptions): CachedModel {
  const { base, answerOf, onLookupError, mode = 'async' } = options;
  let caches = options.caches;

  async function lookUp(cache: EnabledCache, hidden: TensorData): Promise<CachedAnswer | undefined> {
    const out = await cache.model.run({ [LOOKUP_INPUT]: hidden });
    const top = argMax(out[LOOKUP_PROBABILITIES]!.data as Float32Array);
    const answer = cache.baseClassOf[top] ?? -1;
    return (out[LOOKUP_HIT]!.data as Float32Array)[0]! >= (cache.threshold ?? 0.5) && answer >= 0 ? { answer, exit: cache.layer, variant: cache.variant } : undefined;
  }

  return {
    get caches() {
      return caches;
    },
    swap(next) {
      caches = next;
    },
    async run(feeds) {
      const byLayer = new Map(caches.map((c) => [c.layer, c]));
      /** Settles with the lookup in flight's hit; never on a miss (the base goes on). */
      let hit: Promise<{ answered: CachedAnswer }> = never;
      let lookupInFlight = false;
      let input: NamedTensors | TensorData = feeds;
      for (let k = 0; k < base.segments; k++) {
        const segment = base.runSegment(k, input);
        const next = await Promise.race([segment.then((outputs) => ({ outputs })), hit]);
        if ('answered' in next) {
          // Answered: the segment still running is left to finish; its outcome is not needed.
          segment.catch(() => undefined);
          return next.answered;
        }
        const { outputs } = next;
        if (k === base.segments - 1) return { answer: answerOf(outputs), exit: 'full', outputs };
        input = outputs[base.layers[k]!]!;
        const cache = byLayer.get(k);
        // One lookup at a time (Eq. 9): a cache whose layer comes while one runs is skipped.
        if (!cache || lookupInFlight) continue;
        // A failed lookup is a miss: the base's answer is right anyway.
        const lookup = lookUp(cache, copyTensor(input as TensorData)).catch((err: unknown) => {
          onLookupError?.(err, cache);
          return undefined;
        });
        if (mode === 'sync') {
          const answered = await lookup;
          if (answered) return answered;
          continue;
        }
        lookupInFlight = true;
        hit = lookup.then((answered) => {
          lookupInFlight = false;
          return answered ? { answered } : never;
        });
      }
      throw new RangeError(`${base.name} has no segments`);
    },
  };
}
