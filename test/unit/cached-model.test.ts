import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  belowTarget,
  createCacheAdaptation,
  createCachedModel,
  exploreCaches,
  LOOKUP_HIT,
  LOOKUP_INPUT,
  LOOKUP_PROBABILITIES,
  loadSegmentedModel,
  type EnabledCache,
  type Exploration,
  type ExploredVariant,
  type HiddenShape,
  type SegmentedModel,
  type VariantSpec,
} from '../../analyzers/cache/index.js';
import { blockOutputs, createOnnxRuntime, readOnnxModel, type LoadedModel, type ModelRuntime, type NamedTensors, type TensorData } from '../../analyzers/index.js';
import { createHeadTrainer } from '../../analyzers/training/index.js';
import { projectRoot, seededRandom, silentLogger } from '../../core/index.js';
import { f32 } from '../helpers.js';

/**
 * Learned caches on a real network: EfficientNet-Lite0 at 64 px, on noisy images of six colours
 * (its answer depends mostly on the colour, so caches on its hidden layers can learn it).
 */
const SIZE = 64;
const COLOURS: [number, number, number][] = [
  [200, 40, 40],
  [40, 160, 60],
  [40, 60, 200],
  [230, 220, 60],
  [30, 30, 30],
  [240, 240, 240],
];
const LITE0 = { name: 'lite0-64', file: join(projectRoot(), 'models/efficientnet-lite0.onnx') };

function images(count: number, seed: number): NamedTensors {
  const random = seededRandom(seed);
  const data = new Float32Array(count * SIZE * SIZE * 3);
  for (let i = 0; i < count; i++) {
    const colour = COLOURS[Math.floor(random() * COLOURS.length)]!;
    for (let p = 0; p < SIZE * SIZE; p++) for (let c = 0; c < 3; c++) data[(i * SIZE * SIZE + p) * 3 + c] = Math.min(255, Math.max(0, colour[c]! + (random() - 0.5) * 60));
  }
  return { images: { type: 'float32', data, dims: [count, SIZE, SIZE, 3] } };
}
const one = (batch: NamedTensors, i: number): NamedTensors => ({
  images: { type: 'float32', data: (batch.images!.data as Float32Array).slice(i * SIZE * SIZE * 3, (i + 1) * SIZE * SIZE * 3), dims: [1, SIZE, SIZE, 3] },
});
const answerOf = (outputs: NamedTensors): number => {
  const p = f32(outputs.probabilities!);
  return p.indexOf(Math.max(...p));
};

describe('belowTarget: wrong hits that rule out the accuracy target at 95% confidence', () => {
  it.each([
    [3, 1, 0.97, false], // 1 − 0.97³ = 8.7% of the time for a cache at 97%
    [5, 2, 0.97, true], // 0.85%
    [20, 2, 0.97, false], // 12%
    [20, 3, 0.97, true], // 2.1%
    [0, 0, 0.97, false],
    [40, 0, 0.97, false],
    [1, 1, 1, true],
  ])('%i hits, %i wrong, target %f: %s', (hits, wrong, target, expected) => {
    expect(belowTarget(hits, wrong, target)).toBe(expected);
  });
});

describe('learned caches on EfficientNet-Lite0', () => {
  const baseRuntime = createOnnxRuntime({ logger: silentLogger(), workers: 1, intraOpThreads: 1 });
  const lookupRuntime = createOnnxRuntime({ logger: silentLogger(), workers: 1, intraOpThreads: 1 });
  const trainer = createHeadTrainer();
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-cached-model-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let base: SegmentedModel;
  let explored: Exploration;
  const loaded: LoadedModel[] = [];
  const enableVariant = async (v: ExploredVariant): Promise<EnabledCache> => {
    const model = await lookupRuntime.load({ name: v.file, file: v.file });
    loaded.push(model);
    return { layer: v.layer, variant: v.name, model, baseClassOf: explored.baseClassOf, threshold: v.threshold };
  };
  /** Enabled caches for the explored variants at `layers` named `name`. */
  const enable = async (name: string, layers: number[]): Promise<EnabledCache[]> =>
    Promise.all(explored.variants.filter((v) => v.name.startsWith(name) && layers.includes(v.layer)).map(enableVariant));
  /** The deepest layer's variant that passes the accuracy filter with the most hits: what the composition would enable there. */
  const passing = (): ExploredVariant => explored.variants.filter((v) => v.layer === 2 && v.accuracy >= 0.97).sort((a, b) => b.hitRate - a.hitRate)[0]!;

  beforeAll(async () => {
    const layers = blockOutputs(await readOnnxModel(LITE0.file)).filter((_, i) => [1, 4, 8].includes(i));
    base = await loadSegmentedModel(baseRuntime, LITE0, layers, dir);
    explored = await exploreCaches({
      base,
      batches: [images(100, 1), images(100, 2)],
      probabilitiesOf: (outputs) => f32(outputs.probabilities!),
      maxClasses: 8,
      variantsOf: (shape) => [
        { family: 'Pool', features: Math.floor((shape.channels * shape.height * shape.width) / 4) },
        { family: 'Conv', kernel: 3, stride: 1 },
      ],
      train: async (job) => trainer.trainCache({ ...job, epochs: 15 }),
      lookupRuntime,
      dir,
      timingFeeds: () => one(images(1, 9), 0),
      // Exploration leaves out a variant that fails to train: here, every one must train.
      onFailed: ({ layer, name, err }) => {
        throw new Error(`${name}@${layer} failed to train: ${(err as Error).message}`);
      },
    });
  }, 120_000);
  afterAll(async () => {
    for (const m of loaded) await m.dispose();
    await base?.dispose();
    await Promise.all([baseRuntime.close(), lookupRuntime.close(), trainer.close()]);
  });

  it('runs segments merged as one, once loaded, with the outputs of running them one by one', async () => {
    // The runs each model made, by name, through a runtime that counts them.
    const runs: string[] = [];
    const counting: ModelRuntime = {
      ...baseRuntime,
      load: async (spec) => {
        const model = await baseRuntime.load(spec);
        return { ...model, run: (feeds) => (runs.push(spec.name), model.run(feeds)) };
      },
    };
    const layers = blockOutputs(await readOnnxModel(LITE0.file)).filter((_, i) => [1, 4, 8].includes(i));
    const segmented = await loadSegmentedModel(counting, { ...LITE0, name: 'merging' }, layers, join(dir, 'merging'));
    const feeds = one(images(1, 5), 0);
    // A run takes its input's buffer: each gets a copy.
    const copy = (t: TensorData): TensorData => ({ ...t, data: (t.data as Float32Array).slice() });
    const hidden = (await segmented.runSegment(0, feeds))[layers[0]!]!;
    runs.length = 0;
    const stepwise = await segmented.runRange(1, 3, copy(hidden));
    expect(runs).toEqual(['merging#1', 'merging#2', 'merging#3']);
    await segmented.prepareRange(1, 3);
    runs.length = 0;
    const merged = await segmented.runRange(1, 3, copy(hidden));
    expect(runs).toEqual(['merging#1-3']);
    const [a, b] = [f32(stepwise.probabilities!), f32(merged.probabilities!)];
    expect(b.length).toBe(a.length);
    b.forEach((p, i) => expect(Math.abs(p - a[i]!)).toBeLessThan(1e-5));
    await expect(segmented.runRange(2, 4, hidden)).rejects.toThrow(RangeError);
    await segmented.dispose();
  });

  it('explores every (layer, variant): hit rate, precision against the base, lookup and segment times, memory', () => {
    expect(explored.inputs).toBe(200);
    expect(explored.segmentMs).toHaveLength(4);
    expect(explored.shapes.map((s) => s.channels)).toEqual([24, 80, 112]);
    expect(explored.variants.map((v) => `${v.name}@${v.layer}`)).toHaveLength(6);
    for (const v of explored.variants) {
      expect(v.hitRate).toBeGreaterThanOrEqual(0);
      expect(v.lookupMs).toBeGreaterThan(0);
      expect(v.memoryBytes).toBeGreaterThan(0);
    }
    // The base is sure of yellow and unsure of white and red: a cache on the deepest layer answers
    // a good share of inputs at the 97% precision its threshold was calibrated to.
    const deepest = explored.variants.filter((v) => v.layer === 2 && v.accuracy >= 0.97);
    expect(Math.max(0, ...deepest.map((v) => v.hitRate))).toBeGreaterThan(0.2);
    expect(explored.baseClassOf).toHaveLength(9);
    expect(explored.baseClassOf.at(-1)).toBe(-1);
  });

  it('explores without a variant that fails to train, says which, and fails only where every one did', async () => {
    const failed: string[] = [];
    const options = {
      base,
      probabilitiesOf: (outputs: NamedTensors) => f32(outputs.probabilities!),
      maxClasses: 4,
      variantsOf: (shape: HiddenShape): VariantSpec[] => [
        { family: 'Pool', features: Math.floor((shape.channels * shape.height * shape.width) / 16) },
        { family: 'Conv', kernel: 3, stride: 1 },
      ],
      lookupRuntime,
      dir: join(dir, 'failing'),
      timingFeeds: () => one(images(1, 9), 0),
      onFailed: ({ layer, name, err }: { layer: number; name: string; err: unknown }) => failed.push(`${name}@${layer}: ${(err as Error).message}`),
    };
    // The runtime takes the inputs it is given: each exploration its own.
    const partial = await exploreCaches({
      ...options,
      batches: [images(40, 5)],
      train: async (job) => {
        if (job.variant.family === 'Conv') throw new RangeError('memory access out of bounds');
        return trainer.trainCache(job);
      },
    });
    expect(partial.variants.map((v) => `${v.name}@${v.layer}`)).toEqual(partial.shapes.map((s, layer) => `Pool(${Math.floor((s.channels * s.height * s.width) / 16)})@${layer}`));
    expect(failed).toEqual([0, 1, 2].map((layer) => `Conv(3,1)@${layer}: memory access out of bounds`));
    const none = exploreCaches({ ...options, batches: [images(40, 5)], train: async () => Promise.reject(new Error('the cache is closing')) });
    await expect(none).rejects.toThrow('the cache is closing');
  }, 120_000);

  it.each(['async', 'sync'] as const)("%s: every answer is the base model's (a miss) or the answering cache's own (a hit)", async (mode) => {
    const caches = await enable('Pool', [0, 1, 2]);
    const model = createCachedModel({ base, caches, mode, answerOf });
    const batch = images(40, 3);
    const exits = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const answered = await model.run(one(batch, i));
      exits.add(String(answered.exit));
      if (answered.exit === 'full') {
        expect(answered.answer).toBe(answerOf((await base.runAll(one(batch, i))).outputs));
        continue;
      }
      // The cache that answered gives this answer on this input's hidden output, and says hit.
      const { hidden } = await base.runAll(one(batch, i));
      const cache = caches.find((c) => c.layer === answered.exit)!;
      const out = await cache.model.run({ [LOOKUP_INPUT]: hidden[cache.layer]! });
      const p = f32(out[LOOKUP_PROBABILITIES]!);
      expect(explored.baseClassOf[p.indexOf(Math.max(...p))]).toBe(answered.answer);
      expect(f32(out[LOOKUP_HIT]!)[0]).toBeGreaterThanOrEqual(cache.threshold!);
      expect(answered.variant).toBe(cache.variant);
    }
    // Some inputs answered early.
    expect([...exits].some((e) => e !== 'full')).toBe(true);
  });

  it('swaps retrained caches atomically: a request answers from the set it started with, under concurrent lookups', async () => {
    const before = await enable('Pool', [2]);
    const after = await enable('Conv', [2]);
    const model = createCachedModel({ base, caches: before, answerOf });
    const batch = images(30, 4);
    const runs = Array.from({ length: 30 }, (_, i) => {
      const started = model.caches;
      const answered = model.run(one(batch, i)).then((a) => ({ a, started }));
      if (i === 14) model.swap(after);
      return answered;
    });
    const results = await Promise.all(runs);
    for (const { a, started } of results) if (a.exit !== 'full') expect(started.map((c) => c.variant)).toContain(a.variant);
    const used = new Set(results.filter((r) => r.a.exit !== 'full').map((r) => r.a.variant));
    expect([...used].sort()).toEqual([after[0]!.variant, before[0]!.variant].sort());
  });

  it('adapts online: samples requests into a window, retrains the enabled caches from their weights, and swaps them in', async () => {
    const chosen = [passing()];
    const initial = [await enableVariant(chosen[0]!)];
    const model = createCachedModel({ base, caches: initial, answerOf });
    // The frozen layers' runs: the rows each was given, and whether it was disposed.
    const frozenRuns: number[] = [];
    let frozenDisposed = 0;
    const counting: ModelRuntime = {
      ...lookupRuntime,
      async load(spec) {
        const loaded = await lookupRuntime.load(spec);
        if (!spec.name.endsWith('.frozen.onnx')) return loaded;
        return {
          ...loaded,
          run: async (feeds) => (frozenRuns.push(feeds[LOOKUP_INPUT]!.dims[0]!), loaded.run(feeds)),
          dispose: async () => (frozenDisposed++, loaded.dispose()),
        };
      },
    };
    const adaptation = createCacheAdaptation({
      model,
      base,
      variants: chosen,
      exploration: explored,
      probabilitiesOf: (outputs) => f32(outputs.probabilities!),
      train: async (job) => trainer.trainCache(job),
      lookupRuntime: counting,
      dir,
      random: seededRandom(5),
      ...{ group: 10, sampled: 5, window: 30, period: 20, minSamples: 10 },
    });
    await adaptation.remember(one(images(1, 6), 0));
    const batch = images(40, 7);
    for (let i = 0; i < 40; i++) {
      const answered = await model.run(one(batch, i));
      if (answered.exit === 'full') expect(answered.answer).toBe(answerOf((await base.runAll(one(batch, i))).outputs));
      await adaptation.observe(() => one(batch, i), answered);
    }
    // Retrained at requests 20 and 40 (or earlier, at a group whose hit rate lagged).
    const { retrains, samples, meanRetrainMs } = adaptation.status();
    expect(retrains).toBeGreaterThanOrEqual(2);
    expect(samples).toBe(20);
    expect(meanRetrainMs).toBeGreaterThan(0);
    expect(model.caches[0]!.model).not.toBe(initial[0]!.model);
    expect(model.caches[0]!.variant).toBe(chosen[0]!.name);
    // A retrained version's file goes once it is loaded: a long-lived stream would fill the disk.
    expect(readdirSync(dir).filter((f) => /\.v\d+\.onnx$/.test(f))).toEqual([]);
    // The frozen layers ran at most once per kept request (the 20 samples and the one remembered), not once per
    // retraining: two retrainings that each ran them on every row in the window would make 30 or more. How many
    // ran depends on which groups retrained (one that lags retrains early, and the last group may then not).
    const frozenRows = frozenRuns.reduce((a, b) => a + b, 0);
    expect(frozenRows).toBeGreaterThanOrEqual(11);
    expect(frozenRows).toBeLessThanOrEqual(21);
    await adaptation.close();
    expect(frozenDisposed).toBe(1);
  });

  it.each([
    ['keeps a serving cache that still vouches for its hits, at a threshold calibrated again', false],
    ['disables a serving cache whose hits are wrong on the newest requests', true],
  ])('when a retrained version misses the accuracy target, %s', async (_, stale) => {
    const chosen = passing();
    const known = explored.baseClassOf.slice(0, -1);
    // A stale cache: each of its classes stands for another class of the base than the one it learned.
    const baseClassOf = stale ? [...known.slice(1), known[0]!, -1] : explored.baseClassOf;
    const initial = await enableVariant(chosen);
    const model = createCachedModel({ base, caches: [{ ...initial, baseClassOf }], answerOf });
    const classes = baseClassOf.length;
    const adaptation = createCacheAdaptation({
      model,
      base,
      variants: [chosen],
      exploration: { ...explored, baseClassOf },
      probabilitiesOf: (outputs) => f32(outputs.probabilities!),
      // Every retrained version answers "other" on the calibration inputs: it cannot vouch for anything.
      train: async (job) => {
        const rows = job.evaluate!.length / ((job.features ?? job.hidden)!.length / (job.targets.length / classes));
        return { weights: job.init!, loss: 0, backend: 'none', trainMs: 1, evaluation: { predicted: new Int32Array(rows).fill(classes - 1), hit: new Float32Array(rows) } };
      },
      lookupRuntime,
      dir,
      random: seededRandom(5),
      ...{ group: 10, sampled: 5, window: 30, period: 20, minSamples: 10 },
    });
    const remembered = images(40, 10);
    for (let i = 0; i < 40; i++) await adaptation.remember(one(remembered, i));
    const batch = images(30, 11);
    const exits: (number | 'full')[] = [];
    for (let i = 0; i < 30; i++) {
      const answered = await model.run(one(batch, i));
      exits.push(answered.exit);
      await adaptation.observe(() => one(batch, i), answered);
    }
    const status = adaptation.status();
    expect(status.retrains).toBeGreaterThanOrEqual(1);
    expect(status.rejected).toBe(status.retrains);
    if (stale) {
      // Its hits were answered wrong until the retraining at request 20; none after it.
      expect(exits.slice(0, 20).some((e) => e !== 'full')).toBe(true);
      expect(exits.slice(20)).toEqual(Array(10).fill('full'));
      expect(status).toMatchObject({ disabled: 1, variants: [] });
      expect(model.caches).toEqual([]);
    } else {
      expect(status.disabled).toBe(0);
      expect(status.variants).toHaveLength(1);
      expect(status.variants[0]!.accuracy).toBeGreaterThanOrEqual(0.97);
      // The same lookup model serves, at the threshold calibrated again (on these inputs, a lower one).
      expect(model.caches).toHaveLength(1);
      expect(model.caches[0]!.model).toBe(initial.model);
      expect(model.caches[0]!.threshold).toBe(status.variants[0]!.threshold);
      expect(model.caches[0]!.threshold).toBeLessThan(chosen.threshold);
    }
    await adaptation.close();
  });

  it('runs a batch: hits leave it (compaction) or wait for it (the paper), with the answers a request alone gets', async () => {
    const caches = await enable('Conv', [2]);
    const model = createCachedModel({ base, caches, mode: 'sync', answerOf });
    const batch = images(16, 8);
    const alone = [];
    for (let i = 0; i < 16; i++) alone.push(await model.run(one(batch, i)));
    const copy = (): NamedTensors => ({ images: { ...batch.images!, data: batch.images!.data.slice() } });
    const compacted = await model.runBatch(copy());
    const waited = await model.runBatch(copy(), { compact: false });
    for (const run of [compacted, waited]) {
      expect(run.answers.map((a) => [a.answer, a.exit])).toEqual(alone.map((a) => [a.answer, a.exit]));
    }
    // Waiting for all, every request ends with the batch; compacted, a hit ends before it.
    expect(new Set(waited.doneMs).size).toBe(1);
    const ends = (exit: (e: number | 'full') => boolean): number[] => compacted.doneMs.filter((_, i) => exit(compacted.answers[i]!.exit));
    expect(ends((e) => e === 'full').length).toBeGreaterThan(0);
    expect(Math.max(...ends((e) => e !== 'full'))).toBeLessThan(Math.min(...ends((e) => e === 'full')));
  });

  it('runs a batch with asynchronous lookups: each answer is the base\'s or the answering cache\'s, some early', async () => {
    const caches = await enable('Conv', [0, 2]);
    const model = createCachedModel({ base, caches, mode: 'async', answerOf });
    const batch = images(16, 8);
    const copy = (): NamedTensors => ({ images: { ...batch.images!, data: batch.images!.data.slice() } });
    const run = await model.runBatch(copy());
    const full = await base.runAll(copy());
    const row = (t: TensorData, i: number): TensorData => {
      const width = t.data.length / t.dims[0]!;
      return { ...t, data: f32(t).slice(i * width, (i + 1) * width), dims: [1, ...t.dims.slice(1)] };
    };
    for (const [i, answered] of run.answers.entries()) {
      if (answered.exit === 'full') {
        expect(answered.answer).toBe(answerOf({ probabilities: row(full.outputs.probabilities!, i) }));
        continue;
      }
      // A hit is what its cache says on the request's hidden output.
      const cache = caches.find((c) => c.layer === answered.exit)!;
      const out = await cache.model.run({ [LOOKUP_INPUT]: row(full.hidden[cache.layer]!, i) });
      const p = f32(out[LOOKUP_PROBABILITIES]!);
      expect(explored.baseClassOf[p.indexOf(Math.max(...p))]).toBe(answered.answer);
      expect(f32(out[LOOKUP_HIT]!)[0]).toBeGreaterThanOrEqual(cache.threshold!);
    }
    expect(run.answers.filter((a) => a.exit !== 'full').length).toBeGreaterThan(0);
  });
});
