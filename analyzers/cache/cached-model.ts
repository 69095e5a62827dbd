import type { LoadedModel, NamedTensors, TensorData } from '../runtime/index.js';
import { Leases } from './leases.js';
import { LOOKUP_HIT, LOOKUP_INPUT, LOOKUP_PROBABILITIES } from './lookup-model.js';
import type { SegmentedModel } from './segmented-model.js';
import { argMax } from './tensors.js';

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

export interface ClassDistribution {
  readonly classes: readonly number[];
  readonly probabilities: Float32Array;
}

export interface CachedAnswer {
  /** The base model's class index of the answer. */
  readonly answer: number;
  /** A hit's probability of its answer, as the cache's predictor gives it. */
  readonly score?: number;
  /** A hit's predicted distribution, as base classes and their probabilities ("other" left out). */
  readonly predicted?: ClassDistribution;
  /** The layer whose cache answered, or `full` when the base ran to its end. */
  readonly exit: number | 'full';
  readonly variant?: string;
  /** The base model's own outputs (in a batch, the request's rows of them), where it ran to the end. */
  readonly outputs?: NamedTensors;
}

export interface CachedModel {
  /** One request: a batch of one. */
  run(feeds: NamedTensors): Promise<CachedAnswer>;
  /**
   * A batch: after a cached layer the requests whose lookup hits are answered; with `compact`
   * (the default) they leave the batch and the rest go on, else (the paper's semantics) they stay
   * in it and every request ends with the batch. `doneMs` is when each request was answered,
   * from the start.
   */
  runBatch(feeds: NamedTensors, options?: { compact?: boolean }): Promise<{ answers: CachedAnswer[]; doneMs: number[] }>;
  /** Replaces the caches at once: a request uses the set it started with (retrained caches swap in whole). */
  swap(caches: readonly EnabledCache[]): void;
  /** Disposes the lookup model of a cache swapped out, once no lookup (a request's may outlive its answer) runs on it. */
  retire(model: LoadedModel): Promise<void>;
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


export function createCachedModel(options: CachedModelOptions): CachedModel {
  const { base, answerOf, onLookupError, mode = 'async' } = options;
  let caches = options.caches;
  const leases = new Leases<LoadedModel>();
  /** The base's runs from one cached layer to the next, loaded ahead of the batches that need them; none without caches (the caller runs the model whole). */
  const prepareRanges = (): void => {
    const last = base.segments - 1;
    const stops = [...new Set(caches.map((c) => c.layer).filter((layer) => layer >= 0 && layer < last))].sort((a, b) => a - b);
    if (stops.length > 0) [...stops, last].forEach((to, i) => void base.prepareRange(i === 0 ? 0 : stops[i - 1]! + 1, to));
  };
  prepareRanges();

  /** A lookup on a batch of hidden outputs: each row's hit, or undefined for a miss. */
  async function lookUp(cache: EnabledCache, hidden: TensorData): Promise<(CachedAnswer | undefined)[]> {
    const out = await cache.model.run({ [LOOKUP_INPUT]: hidden });
    const probabilities = out[LOOKUP_PROBABILITIES]!.data as Float32Array;
    const hits = out[LOOKUP_HIT]!.data as Float32Array;
    const classes = cache.baseClassOf.length;
    const known = cache.baseClassOf.flatMap((base, i) => (base >= 0 ? [i] : []));
    const knownClasses = known.map((i) => cache.baseClassOf[i]!);
    return Array.from(hits, (hit, row) => {
      const p = probabilities.subarray(row * classes, (row + 1) * classes);
      const top = argMax(p);
      const answer = cache.baseClassOf[top] ?? -1;
      if (!(hit >= (cache.threshold ?? 0.5) && answer >= 0)) return undefined;
      return { answer, score: p[top]!, predicted: { classes: knownClasses, probabilities: Float32Array.from(known, (i) => p[i]!) }, exit: cache.layer, variant: cache.variant };
    });
  }

  /**
   * The caches a request starts with, each held (not disposed if swapped out meanwhile) until the
   * request ends, or for a lookup still running then, until that lookup does.
   */
  function holdCaches() {
    const held = caches.map((cache) => ({ cache, release: leases.acquire(cache.model) }));
    const running = new Set<EnabledCache>();
    return {
      byLayer: new Map(caches.map((c) => [c.layer, c])),
      lookingUp<T>(cache: EnabledCache, lookup: Promise<T>): Promise<T> {
        running.add(cache);
        return lookup.finally(() => held.find((h) => h.cache === cache)?.release());
      },
      end: () => held.filter((h) => !running.has(h.cache)).forEach((h) => h.release()),
    };
  }

  /**
   * A batch through the segments. A synchronous lookup makes the batch wait for it; an
   * asynchronous one runs beside the segments after its layer (one in flight), and its hits are
   * answered as it ends. Requests answered leave the batch at the next cut (`compact`) or
   * stay in it to the end (the paper's semantics). A lookup still running when the base ends is
   * left: the base's answer is as good, and a miss waits for no lookup.
   */
  async function runBatchOf(feeds: NamedTensors, held: ReturnType<typeof holdCaches>, compact: boolean): Promise<{ answers: CachedAnswer[]; doneMs: number[] }> {
    const started = performance.now();
    const size = Object.values(feeds)[0]?.dims[0] ?? 0;
    const answers: (CachedAnswer | undefined)[] = Array.from({ length: size }, () => undefined);
    const doneMs = new Array<number>(size).fill(0);
    /** The requests whose rows the batch still holds, in row order. */
    let rows = Array.from({ length: size }, (_, i) => i);
    let input: NamedTensors | TensorData = feeds;
    let inFlight: { requests: number[]; found: Promise<(CachedAnswer | undefined)[]> } | undefined;
    const answer = (requests: readonly number[], found: readonly (CachedAnswer | undefined)[]): void => {
      const now = performance.now() - started;
      found.forEach((answered, i) => {
        if (!answered) return;
        answers[requests[i]!] = answered;
        doneMs[requests[i]!] = now;
      });
    };
    const done = () => answers.every((a) => a !== undefined);
    /** The batch ends: waiting for all (not `compact`), every request ends with it. */
    const end = () => {
      const now = performance.now() - started;
      for (let i = 0; i < size; i++) if (!compact || answers[i]!.exit === 'full') doneMs[i] = now;
      return { answers: answers as CachedAnswer[], doneMs };
    };
    const dropAnswered = (): void => {
      if (!compact || rows.every((request) => !answers[request])) return;
      const keep = rows.map((request, row) => ({ request, row })).filter(({ request }) => !answers[request]);
      input = sliceRows(input as TensorData, keep.map((x) => x.row));
      rows = keep.map((x) => x.request);
    };
    const last = base.segments - 1;
    for (let from = 0, k = 0; from <= last; from = k + 1) {
      if (from > 0) dropAnswered();
      // Each cut the base stops at costs a hand-off, so it runs on to the next cached layer, segment
      // by segment only while a lookup under way could answer rows that would then leave the batch.
      const nextCached = Math.min(last, ...[...held.byLayer.keys()].filter((layer) => layer >= from));
      k = inFlight && compact && rows.length > 1 ? from : nextCached;
      const segment = base.runRange(from, k, input);
      let outputs: NamedTensors;
      const lookup = inFlight;
      const first = lookup ? await Promise.race([segment.then((ran) => ({ ran })), lookup.found.then((found) => ({ found }))]) : { ran: await segment };
      if ('found' in first) {
        inFlight = undefined;
        answer(lookup!.requests, first.found);
        if (done()) {
          // Answered: the segment still running is left to finish; its outcome is not needed.
          segment.catch(() => undefined);
          return end();
        }
        outputs = await segment;
      } else outputs = first.ran;
      if (k === last) {
        rows.forEach((request, row) => {
          if (answers[request]) return;
          const own = Object.fromEntries(Object.entries(outputs).map(([name, t]) => [name, sliceRows(t, [row])]));
          answers[request] = { answer: answerOf(own), exit: 'full', outputs: own };
        });
        return end();
      }
      input = outputs[base.layers[k]!]!;
      const cache = held.byLayer.get(k);
      // One lookup at a time (Eq. 9): a cache whose layer comes while one runs is skipped.
      if (!cache || inFlight) continue;
      const open = rows.map((request, row) => ({ request, row })).filter(({ request }) => !answers[request]);
      if (open.length === 0) continue;
      // A failed lookup is a miss: the base's answer is right anyway.
      const found = held.lookingUp(cache, lookUp(cache, sliceRows(input as TensorData, open.map((o) => o.row)))).catch((err: unknown) => {
        onLookupError?.(err, cache);
        return [];
      });
      const requests = open.map((o) => o.request);
      if (mode === 'async') {
        inFlight = { requests, found };
        continue;
      }
      answer(requests, await found);
      if (done()) return end();
    }
    throw new RangeError(`${base.name} has no segments`);
  }

  async function runBatch(feeds: NamedTensors, options?: { compact?: boolean }): Promise<{ answers: CachedAnswer[]; doneMs: number[] }> {
    const held = holdCaches();
    try {
      return await runBatchOf(feeds, held, options?.compact ?? true);
    } finally {
      held.end();
    }
  }

  return {
    get caches() {
      return caches;
    },
    swap(next) {
      caches = next;
      prepareRanges();
    },
    retire: (model) => leases.retire(model),
    async run(feeds) {
      return (await runBatch(feeds)).answers[0]!;
    },
    runBatch,
  };
}

/** The rows `rows` of a tensor's first dimension. */
function sliceRows(t: TensorData, rows: readonly number[]): TensorData {
  const width = t.dims.slice(1).reduce((a, b) => a * b, 1);
  const data = new (t.data.constructor as Float32ArrayConstructor)(rows.length * width);
  rows.forEach((r, i) => data.set((t.data as Float32Array).subarray(r * width, (r + 1) * width), i * width));
  return { ...t, data, dims: [rows.length, ...t.dims.slice(1)] };
}
