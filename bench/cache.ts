// `npm run bench -- cache [--model efficientnet-lite2|faceres] [--explore N] [--inputs N] [--layers K]
// [--budget-mb M]` (defaults efficientnet-lite2, 400, 600, 4, 64): learned caches (GATI) on
// EfficientNet-Lite2, the crop classifier, over the crops CenterNet finds in the shared footage, or
// on FaceRes, the billboard app's face attributes, over the faces found there as the app finds
// them (its caches answer gender × age decade); against the base model alone on the same inputs in
// the same run.
//
// Exploration runs on crops of one half of the footage (split in time); composition picks the
// caches; the other half is replayed input by input, as it was filmed (temporal locality of real
// video) and as a trace built the digest's way (§5.7: Zipf class popularity, the order of the
// classes drawn anew every SWITCH inputs). Each input runs, in turn: the whole base model; the
// cached model with its static caches, asynchronous and synchronous; and the adaptive cached model,
// whose caches are retrained on a sliding window of sampled requests; then batches of 4 with the
// static caches, hits leaving the batch against the paper's wait-for-all. The base model and the
// lookups each have one thread (the paper's split of a machine's cores between them).
// Retraining is waited for and not timed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  argMax,
  blockOutputs,
  composeCaches,
  createCacheAdaptation,
  createCachedModel,
  createHeadTrainer,
  createOnnxRuntime,
  defaultVariants,
  exploreCaches,
  FACERES,
  FACERES_DEFAULT_MALE_THRESHOLD,
  faceresClasses,
  greedyComposition,
  letterboxBatchNative,
  loadSegmentedModel,
  parameterCount,
  readOnnxModel,
  type EnabledCache,
  type Exploration,
  type ExploredVariant,
  type HeadTrainer,
  type ModelRuntime,
  type NamedTensors,
  type RgbImage,
  type SegmentedModel,
} from '../analyzers/index.js';
import { loadModelZoo, seededRandom } from '../core/index.js';
import { logger, type Crop } from './weg-crops.js';
import { faceCrops } from './weg-faces.js';
import { objectCrops } from './weg-objects.js';

/** The models cached: the crops each is fed, and the classes its caches answer from its outputs. */
const SUBJECTS: Record<string, { inputSize: number; crops: typeof objectCrops; classesOf(outputs: NamedTensors): Float32Array }> = {
  'efficientnet-lite2': { inputSize: 260, crops: objectCrops, classesOf: (outputs) => outputs.probabilities!.data as Float32Array },
  faceres: { inputSize: FACERES.inputSize, crops: faceCrops, classesOf: (outputs) => faceresClasses(outputs, outputs.gender!.dims[0]!, FACERES_DEFAULT_MALE_THRESHOLD) },
};
const SEED = 11;
/** The cache's classes: the base's commonest top classes, and other. */
const MAX_CLASSES = 16;
/** Variants above this many parameters take minutes to train here: left out (the paper chose no FC cache on CPU either). */
const MAX_PARAMETERS = 4_000_000;
/** Online adaptation, scaled from the paper's 100-request groups, 60-minute window and 15-minute period. */
const ADAPT = { group: 100, sampled: 20, window: 300, period: 200 };
/** Inputs of the exploration set mixed into every retraining. */
const ORIGINAL = 100;
/** The skewed trace: Zipf exponent, and how often the classes' order is drawn anew. */
const ZIPF = 1.5;
const SWITCH = 150;
/** Batch size of the batch comparison. */
const BATCH = 4;

interface Input {
  feeds: () => NamedTensors;
  /** The base model's class. */
  label: number;
}

export async function cacheBench(args: readonly string[]): Promise<void> {
  const option = (name: string, fallback: number): number => {
    const at = args.indexOf(name);
    const value = at >= 0 ? Number(args[at + 1]) : fallback;
    if (!(value > 0)) throw new Error(`${name}: expected a positive number, got ${args[at + 1]}`);
    return value;
  };
  const exploreCount = option('--explore', 400);
  const inputCount = option('--inputs', 600);
  const layerCount = option('--layers', 4);
  const budgetBytes = option('--budget-mb', 64) * 1e6;
  const model = args.includes('--model') ? args[args.indexOf('--model') + 1]! : 'efficientnet-lite2';
  const subject = Object.hasOwn(SUBJECTS, model) ? SUBJECTS[model]! : undefined;
  if (!subject) throw new Error(`--model: expected one of ${Object.keys(SUBJECTS).join(', ')}, got ${model}`);
  const { inputSize, classesOf } = subject;

  const zoo = loadModelZoo();
  const spec = zoo[model]!;
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-bench-cache-'));
  const detectRuntime = createOnnxRuntime({ logger });
  const baseRuntime = createOnnxRuntime({ logger, workers: 1, intraOpThreads: 1 });
  const lookupRuntime = createOnnxRuntime({ logger, workers: 1, intraOpThreads: 1 });
  const trainer = createHeadTrainer();
  try {
    const crops: Crop[] = await subject.crops(detectRuntime, zoo);
    await detectRuntime.close();
    const all = blockOutputs(await readOnnxModel(spec.file));
    const layers = Array.from({ length: Math.min(layerCount, all.length) }, (_, i) => all[Math.floor(((i + 1) * all.length) / (Math.min(layerCount, all.length) + 1))]!);
    console.log(`base: ${model} at ${inputSize} px, cut at ${layers.length} of its ${all.length} block outputs: ${layers.join(', ')}`);
    const base = await loadSegmentedModel(baseRuntime, { name: model, file: spec.file }, layers, dir);
    const whole = await baseRuntime.load({ name: `${model}-whole`, file: spec.file });
    const prepare = async (image: RgbImage): Promise<() => NamedTensors> => {
      const { input } = await letterboxBatchNative([image], inputSize, model);
      return () => ({ images: { ...input, data: input.data.slice() as Float32Array } });
    };
    const answerOf = (outputs: NamedTensors): number => argMax(classesOf(outputs));

    const random = seededRandom(SEED);
    const trainHalf = crops.filter((c) => !c.test).sort(() => random() - 0.5).slice(0, exploreCount);
    console.log(`exploring on ${trainHalf.length} crops of one half of the footage (${crops.length} crops in all)`);
    const exploration = await exploreCaches({
      base,
      batches: batchesOf(trainHalf.map((c) => c.image), 8, inputSize),
      maxClasses: MAX_CLASSES,
      probabilitiesOf: classesOf,
      variantsOf: (shape) => defaultVariants(shape).filter((v) => parameterCount(v, shape, MAX_CLASSES + 1) <= MAX_PARAMETERS),
      train: async (job) => trainer.trainCache(job),
      lookupRuntime,
      dir,
      whole,
      timingFeeds: () => ({ images: { type: 'float32', data: new Float32Array(inputSize * inputSize * 3).fill(128), dims: [1, inputSize, inputSize, 3] } }),
      onFailed: ({ layer, name, err }) => console.log(`  layer ${layer} ${name}: failed, left out (${(err as Error).message})`),
      onVariant: (v, done, total) => console.log(`  [${done}/${total}] layer ${v.layer} ${v.name}: hit rate ${v.hitRate.toFixed(3)}, precision ${v.accuracy.toFixed(3)} (threshold ${v.threshold}), lookup ${v.lookupMs.toFixed(2)} ms, ${(v.memoryBytes / 1e6).toFixed(1)} MB, trained in ${v.trainMs.toFixed(0)} ms`),
    });
    console.log(`segments: ${exploration.segmentMs.map((ms) => ms.toFixed(1)).join(' + ')} ms, a stop at a cached layer ${exploration.stopMs.toFixed(2)} ms; cache classes: ${exploration.baseClassOf.length - 1} and other`);

    const problem = { segmentMs: exploration.segmentMs, stopMs: exploration.stopMs, variants: exploration.variants, memoryBudgetBytes: budgetBytes };
    const composition = composeCaches(problem);
    const describe = (c: { variants: readonly { name: string; layer: number }[]; expectedMs: number; expectedAccuracy: number }): string =>
      `${c.variants.map((v) => `${v.name}@${v.layer}`).join(' + ') || 'none'}: expected ${c.expectedMs.toFixed(2)} ms at ${c.expectedAccuracy.toFixed(3)}`;
    console.log(`composition (${composition.alpha === undefined ? 'a subset of an α\'s choice' : `α ${composition.alpha}`}): ${describe(composition)}`);
    console.log(`  latency-greedy: ${describe(greedyComposition(problem, 'latency'))}`);
    console.log(`  hit-rate-greedy: ${describe(greedyComposition(problem, 'hit-rate'))}`);
    const chosen = composition.variants as ExploredVariant[];
    // Without caches the cached model is the base: in one run, not segment by segment.
    if (chosen.length === 0) await base.prepareRange(0, base.segments - 1);

    // The held-out half, labelled by the base model.
    const testCrops = crops.filter((c) => c.test);
    const held: Input[] = [];
    for (const c of testCrops) {
      const feeds = await prepare(c.image);
      held.push({ feeds, label: answerOf(await whole.run(feeds())) });
    }
    const traces = [
      { name: 'footage', inputs: held.slice(0, inputCount) },
      { name: `zipf ${ZIPF}`, inputs: zipfTrace(held, inputCount, seededRandom(SEED)) },
    ];
    const figures = [];
    for (const trace of traces) {
      console.log(`${trace.name}: ${trace.inputs.length} inputs`);
      figures.push(await runTrace(trace.inputs, { base, whole, chosen, exploration, lookupRuntime, trainer, dir, answerOf, classesOf, original: trainHalf.slice(0, ORIGINAL).map((c) => c.image), prepare }));
    }
    const [footage, zipf] = figures;
    console.log(JSON.stringify({ model, ...footage, zipf, composition: chosen.map((v) => `${v.name}@${v.layer}`), budgetMb: budgetBytes / 1e6 }));
    await base.dispose();
    await whole.dispose();
  } finally {
    await Promise.all([trainer.close(), baseRuntime.close(), lookupRuntime.close(), detectRuntime.close().catch(() => undefined)]);
    rmSync(dir, { recursive: true, force: true });
  }
}

interface TraceContext {
  base: SegmentedModel;
  whole: { run(feeds: NamedTensors): Promise<NamedTensors> };
  chosen: readonly ExploredVariant[];
  exploration: Exploration;
  lookupRuntime: ModelRuntime;
  trainer: HeadTrainer;
  dir: string;
  answerOf(outputs: NamedTensors): number;
  classesOf(outputs: NamedTensors): Float32Array;
  /** Inputs of the exploration set, mixed into every retraining against forgetting. */
  original: readonly RgbImage[];
  prepare(image: RgbImage): Promise<() => NamedTensors>;
}

async function runTrace(inputs: readonly Input[], context: TraceContext) {
  const { base, whole, chosen, exploration, lookupRuntime, answerOf } = context;
  const enable = async (variants: readonly ExploredVariant[]): Promise<EnabledCache[]> =>
    Promise.all(variants.map(async (v) => ({ layer: v.layer, variant: v.name, model: await lookupRuntime.load({ name: v.file, file: v.file }), baseClassOf: exploration.baseClassOf, threshold: v.threshold })));
  const initial = await enable(chosen);
  const models = {
    async: createCachedModel({ base, caches: await enable(chosen), answerOf }),
    sync: createCachedModel({ base, caches: await enable(chosen), answerOf, mode: 'sync' }),
    adaptive: createCachedModel({ base, caches: initial, answerOf }),
  };
  const adapt = createCacheAdaptation({
    model: models.adaptive,
    base,
    variants: chosen,
    exploration,
    probabilitiesOf: context.classesOf,
    train: async (job) => context.trainer.trainCache(job),
    lookupRuntime,
    dir: context.dir,
    random: seededRandom(SEED + 1),
    ...ADAPT,
  });
  for (const image of context.original) await adapt.remember((await context.prepare(image))());
  const times = { base: [] as number[], async: [] as number[], sync: [] as number[], adaptive: [] as number[], asyncMiss: [] as number[], adaptiveMiss: [] as number[] };
  const agree = { async: 0, sync: 0, adaptive: 0 };
  const exits = new Map<string, number>();
  const timed = async <T>(run: () => Promise<T>): Promise<[T, number]> => {
    const started = performance.now();
    const out = await run();
    return [out, performance.now() - started];
  };
  for (const input of inputs) {
    const [, baseMs] = await timed(async () => whole.run(input.feeds()));
    times.base.push(baseMs);
    for (const mode of ['async', 'sync', 'adaptive'] as const) {
      const [answered, ms] = await timed(async () => models[mode].run(input.feeds()));
      times[mode].push(ms);
      if (answered.answer === input.label) agree[mode] += 1;
      if (mode !== 'sync' && answered.exit === 'full') times[mode === 'async' ? 'asyncMiss' : 'adaptiveMiss'].push(ms);
      if (mode === 'adaptive') {
        exits.set(String(answered.exit), (exits.get(String(answered.exit)) ?? 0) + 1);
        // Retraining is waited for, between requests, and not timed.
        await adapt.observe(input.feeds, answered);
      }
    }
  }
  // Batches of BATCH consecutive inputs, static caches: hits leaving the batch against the
  // paper's wait-for-all, and the base model's batch; a request's latency is when it is answered.
  const batched = { base: [] as number[], compact: [] as number[], waitForAll: [] as number[] };
  for (let i = 0; i + BATCH <= inputs.length; i += BATCH) {
    const feeds = (): NamedTensors => stackFeeds(inputs.slice(i, i + BATCH).map((input) => input.feeds()));
    const [, baseMs] = await timed(async () => whole.run(feeds()));
    batched.base.push(...new Array<number>(BATCH).fill(baseMs));
    batched.compact.push(...(await models.sync.runBatch(feeds())).doneMs);
    batched.waitForAll.push(...(await models.sync.runBatch(feeds(), { compact: false })).doneMs);
  }
  const n = inputs.length;
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const hitRateByLayer = Object.fromEntries(chosen.map((v) => [`${v.name}@${v.layer}`, round((exits.get(String(v.layer)) ?? 0) / n, 3)]));
  const f = {
    baseMeanMs: round(mean(times.base), 2),
    cacheMeanMs: round(mean(times.adaptive), 2),
    meanSpeedup: round(mean(times.base) / mean(times.adaptive), 2),
    agreement: round(agree.adaptive / n, 3),
    missP99Ratio: round(p99(times.adaptiveMiss) / p99(times.base), 3),
    hitRateByLayer,
    staticSpeedup: round(mean(times.base) / mean(times.async), 2),
    staticAgreement: round(agree.async / n, 3),
    adaptiveSpeedup: round(mean(times.base) / mean(times.adaptive), 2),
    syncP99Ms: round(p99(times.sync), 2),
    asyncP99Ms: round(p99(times.async), 2),
    syncMeanMs: round(mean(times.sync), 2),
    baseP99Ms: round(p99(times.base), 2),
    retrainMs: round(adapt.status().meanRetrainMs, 0),
    retrains: adapt.status().retrains,
    batch: { size: BATCH, baseMs: round(mean(batched.base), 2), compactMs: round(mean(batched.compact), 2), waitForAllMs: round(mean(batched.waitForAll), 2) },
  };
  console.log(
    `  base ${f.baseMeanMs} ms; static async ${round(mean(times.async), 2)} ms (${f.staticSpeedup}x, agreement ${f.staticAgreement}), sync ${f.syncMeanMs} ms; ` +
      `adaptive ${f.cacheMeanMs} ms (${f.adaptiveSpeedup}x, agreement ${f.agreement}); hits by layer ${JSON.stringify(hitRateByLayer)}; p99 base ${f.baseP99Ms}, async ${f.asyncP99Ms}, sync ${f.syncP99Ms} ms; misses' p99 / base's ${f.missP99Ratio}; ${f.retrains} retrains, ${f.retrainMs} ms per variant; ` +
      `batches of ${BATCH}: base ${f.batch.baseMs} ms, hits leaving ${f.batch.compactMs} ms, waiting for all ${f.batch.waitForAllMs} ms per request`,
  );
  await adapt.close();
  for (const model of [models.async, models.sync]) for (const c of model.caches) await c.model.dispose();
  for (const c of initial) await c.model.dispose();
  return f;
}

/** §5.7: class popularity Zipf(ZIPF) over the classes with at least 5 inputs, their order drawn anew every SWITCH inputs. */
function zipfTrace(inputs: readonly Input[], length: number, random: () => number): Input[] {
  const byClass = new Map<number, Input[]>();
  for (const input of inputs) byClass.set(input.label, [...(byClass.get(input.label) ?? []), input]);
  const classes = [...byClass].filter(([, list]) => list.length >= 5).map(([label]) => label);
  const weights = classes.map((_, rank) => 1 / (rank + 1) ** ZIPF);
  const total = weights.reduce((a, b) => a + b, 0);
  let order = classes;
  return Array.from({ length }, (_, i) => {
    if (i % SWITCH === 0) order = [...classes].sort(() => random() - 0.5);
    let r = random() * total;
    let rank = 0;
    while (rank < weights.length - 1 && (r -= weights[rank]!) > 0) rank++;
    const list = byClass.get(order[rank]!)!;
    return list[Math.floor(random() * list.length)]!;
  });
}

/** Batch-1 feeds stacked into one batch. */
function stackFeeds(parts: readonly NamedTensors[]): NamedTensors {
  const first = parts[0]!.images!;
  const data = new Float32Array(parts.length * first.data.length);
  parts.forEach((p, i) => data.set(p.images!.data as Float32Array, i * first.data.length));
  return { images: { ...first, data, dims: [parts.length, ...first.dims.slice(1)] } };
}

async function* batchesOf(images: readonly RgbImage[], size: number, inputSize: number): AsyncGenerator<NamedTensors> {
  for (let i = 0; i < images.length; i += size) yield { images: (await letterboxBatchNative(images.slice(i, i + size), inputSize, 'bench')).input };
}

const p99 = (xs: readonly number[]): number => (xs.length === 0 ? 0 : [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]!);
const round = (n: number, digits: number): number => Number(n.toFixed(digits));
