import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, PanoptesError, seededRandom, type CacheExit, type ClassifierCacheConfig, type Logger } from '../../core/index.js';
import type { LoadedModel, ModelRuntime, NamedTensors, TensorData } from '../runtime/index.js';
import type { CacheHeadJob, TrainedCache } from '../training/index.js';
import { createCacheAdaptation, type CacheAdaptation } from './adaptation.js';
import { createCachedModel, type CachedAnswer, type CachedModel, type ClassDistribution, type EnabledCache } from './cached-model.js';
import { composeCaches, effectiveHitRates, violation } from './composition.js';
import { emptyRecord, exploreCaches, record, type ExploredVariant, type Recorded } from './explore.js';
import type { FrameCacheStats } from './frame-cache.js';
import { loadSegmentedModel, type SegmentedModel } from './segmented-model.js';
import { createStreamFigureBook, type StreamFigures } from './stream-figures.js';
import { argMax, rowOf } from './tensors.js';
import { defaultVariants, parameterCount } from './variant.js';

/**
 * GATI's learned caches on an image classifier node of an app (docs/learned-caches.md), the whole
 * loop online: the node's first `explore` requests run the model segment by segment and are
 * recorded; exploration trains the variants on them (on the training thread) while requests run
 * the whole model; the composition enables the best set; from then on each batch runs through
 * the cached model (a request whose lookup hits leaves the batch at that layer), and adaptation
 * retrains the enabled variants on a sample of the requests. Where exploration enables none, or
 * adaptation disables every one (none meets the accuracy filter on the newest requests), the
 * model runs whole, and after `reexplore` requests the loop starts again from recording: a
 * stream's content changes. One set of caches per node, learned from all its streams: a node fed
 * crops sees the same objects from every camera's frames.
 */
export interface ClassifierCacheOptions {
  runtime: ModelRuntime;
  model: { name: string; file: string; inputName: string; inputSize: number };
  /** The model whole: what runs while the caches are explored, or where none could be enabled. */
  whole: LoadedModel;
  /** The candidate layers (tensor names) explored. */
  layers: readonly string[];
  config: ClassifierCacheConfig;
  probabilitiesOf(outputs: NamedTensors): Float32Array;
  train(job: CacheHeadJob): Promise<TrainedCache>;
  logger: Logger;
  /** @defaultValue 1 */
  seed?: number;
}

/** A request's answer: the class index (of `probabilitiesOf`), its probability, and where it was answered. */
export interface ClassifiedRow {
  readonly answer: number;
  readonly score: number;
  readonly exit: CacheExit;
  /** The model's own outputs for the request (a batch of one, copied when asked for), where it ran to its end. */
  readonly outputs?: () => NamedTensors;
  /** A hit's predicted distribution over the cache's classes. */
  readonly predicted?: ClassDistribution | undefined;
}

export interface ClassifierCache {
  /** A batch of the model's input; `keys` name each row's stream (app/node/source), for the figures; '' for none. */
  run(input: TensorData, keys: readonly string[]): Promise<ClassifiedRow[]>;
  /** Per stream and enabled variant, once caches serve. */
  stats(): FrameCacheStats[];
  /** Stops exploring and retraining (a training job under way fails), then frees what it holds. */
  close(): Promise<void>;
}

/** Requests waiting to be observed by the adaptation, at most: beyond, they go unsampled (counted, logged). */
const MAX_PENDING = 64;
/** The recorded hidden outputs, at most: `explore` is lowered to fit. */
const MAX_RECORDED_BYTES = 512 * 2 ** 20;
/** Exploration inputs kept for adaptation, mixed into every retraining against forgetting. */
const ORIGINAL_ROWS = 50;
/** The wait before exploring again doubles while explorations enable none, up to this many times `reexplore`. */
const MAX_REEXPLORE_FACTOR = 64;

export async function createClassifierCache(options: ClassifierCacheOptions): Promise<ClassifierCache> {
  const { runtime, model, whole, config, probabilitiesOf, logger } = options;
  const dir = await mkdtemp(join(tmpdir(), 'panoptes-classifier-cache-'));
  let base: SegmentedModel;
  try {
    base = await loadSegmentedModel(runtime, { name: model.name, file: model.file }, options.layers, dir, (err, range) =>
      logger.warn({ err, range }, `${model.name}'s segments ${range} could not be loaded merged; they run one by one`),
    );
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  // Asynchronous lookups run on a thread and core of their own, where the lookup models are loaded and timed.
  const beside = config.lookups === 'async' ? runtime.beside?.(1) : runtime;
  if (!beside) {
    await base.dispose();
    await rm(dir, { recursive: true, force: true });
    throw new PanoptesError(ErrorCode.AppInvalid, `cache.lookups async: the ${runtime.name} runtime cannot run lookups beside ${model.name}; use sync`, { details: { model: model.name } });
  }
  const lookupRuntime: ModelRuntime = beside;
  let closed = false;
  const closing = new AbortController();
  let lookupsClosed = false;
  const train = async (job: CacheHeadJob): Promise<TrainedCache> => {
    if (closed) throw new Error('the cache is closing');
    return options.train({ ...job, falsePositiveWeight: config.falsePositiveWeight });
  };
  const feedsOf = (input: TensorData): NamedTensors => ({ [model.inputName]: input });

  let phase: 'recording' | 'exploring' | 'serving' | 'whole' = 'recording';
  let recorded: Recorded | undefined = emptyRecord(base);
  let [recordedRows, toRecord] = [0, config.explore];
  /** Requests to run whole before exploring again (undefined: never again), and the wait after the next exploration that enables none. */
  let [wholeUntilExplore, nextWait] = [undefined as number | undefined, config.reexplore];
  let serving: { cached: CachedModel; adaptation: CacheAdaptation } | undefined;
  const streams = createStreamFigureBook();
  let [pending, unsampled, failures] = [0, 0, 0];
  let observing = Promise.resolve();
  let exploring: Promise<void> | undefined;

  const rowsOf = (outputs: NamedTensors, size: number): ClassifiedRow[] => {
    const probabilities = probabilitiesOf(outputs);
    const classes = probabilities.length / size;
    return Array.from({ length: size }, (_, i) => {
      const row = probabilities.subarray(i * classes, (i + 1) * classes);
      const answer = argMax(row);
      return { answer, score: row[answer]!, exit: { at: 'full', variant: '' }, outputs: () => rowOf(outputs, i) };
    });
  };

  /** Up to ORIGINAL_ROWS recorded requests, row by row (copies), before exploration lets go of them. */
  function originalRows(from: Recorded): { hidden: Float32Array[]; probabilities: Float32Array }[] {
    const widths = from.shapes.map((s) => s.channels * s.height * s.width);
    const rows: { hidden: Float32Array[]; probabilities: Float32Array }[] = [];
    from.distributions.forEach((distribution, batch) => {
      const size = from.hidden[0]![batch]!.length / widths[0]!;
      const classes = distribution.length / size;
      for (let r = 0; r < size && rows.length < ORIGINAL_ROWS; r++) {
        rows.push({
          hidden: from.hidden.map((layer, l) => layer[batch]!.slice(r * widths[l]!, (r + 1) * widths[l]!)),
          probabilities: distribution.slice(r * classes, (r + 1) * classes),
        });
      }
    });
    return rows;
  }

  async function explore(collected: Recorded): Promise<void> {
    const started = performance.now();
    const sizes = collected.shapes.flatMap((shape) => defaultVariants(shape).map((v) => parameterCount(v, shape, config.maxClasses + 1)));
    const candidates = sizes.filter((parameters) => parameters <= config.maxParameters).length;
    if (candidates === 0) {
      phase = 'whole';
      logger.warn({ maxParameters: config.maxParameters }, `cache.maxParameters ${config.maxParameters} leaves no variant of ${model.name} to explore on its layers (the smallest has ${Math.min(...sizes)}); the model runs whole`);
      return;
    }
    logger.info({ requests: recordedRows, layers: options.layers, variants: candidates }, `exploring learned caches of ${model.name}`);
    const original = originalRows(collected);
    const exploration = await exploreCaches({
      base,
      recorded: collected,
      probabilitiesOf,
      maxClasses: config.maxClasses,
      variantsOf: (shape) => defaultVariants(shape).filter((v) => parameterCount(v, shape, config.maxClasses + 1) <= config.maxParameters),
      train,
      lookupRuntime,
      dir,
      accuracyTarget: config.accuracyTarget,
      seed: options.seed ?? 1,
      signal: closing.signal,
      onFailed: ({ layer, name, err }) => {
        if (!closed) logger.warn({ err, layer: base.layers[layer], variant: name }, `learned cache variant ${name} of ${model.name} failed to train; exploring the others`);
      },
      // No `whole`: a stop timed here, beside the app's batches on the model's thread, came out
      // anywhere from 0 to 4 ms a cut on one machine, enough to refuse every cache; the stops
      // are charged where they are measured apart (`npm run bench -- cache`).
      timingFeeds: () => feedsOf({ type: 'float32', data: new Float32Array(model.inputSize * model.inputSize * 3).fill(128), dims: [1, model.inputSize, model.inputSize, 3] }),
    });
    const problem = { segmentMs: exploration.segmentMs, stopMs: exploration.stopMs, memoryBudgetBytes: config.memoryMB * 1e6, accuracyTarget: config.accuracyTarget };
    const composition = composeCaches({ ...problem, variants: exploration.variants });
    const chosen = composition.variants as ExploredVariant[];
    const exploreMs = Math.round(performance.now() - started);
    if (chosen.length === 0 || closed) {
      exploreLater();
      if (!closed) {
        // What each variant measured, and why none was enabled: the filter, the budget, or a lookup slower than the rest of the model (Eq. 9).
        const measured = exploration.variants.map((v) => ({ layer: base.layers[v.layer], variant: v.name, accuracy: v.accuracy, hitRate: v.hitRate, lookupMs: v.lookupMs, why: violation({ ...problem, variants: [v] }, [v]) ?? 'no gain' }));
        logger.info({ variants: measured, segmentMs: exploration.segmentMs, stopMs: exploration.stopMs, exploreMs }, `no learned cache of ${model.name} passes the accuracy filter (${config.accuracyTarget}) within the memory budget (${config.memoryMB} MB) and the time its model leaves a lookup; the model runs whole${exploringAgain()}`);
      }
      return;
    }
    nextWait = config.reexplore;
    const initial = await Promise.all(
      chosen.map(async (v): Promise<EnabledCache> => ({ layer: v.layer, variant: v.name, model: await lookupRuntime.load({ name: v.file, file: v.file }), baseClassOf: exploration.baseClassOf, threshold: v.threshold })),
    );
    const cached = createCachedModel({
      base,
      caches: initial,
      answerOf: (outputs) => argMax(probabilitiesOf(outputs)),
      mode: config.lookups,
      // A lookup left running when its thread is closed fails with it: nothing to say.
      onLookupError: (err, cache) => {
        if (!lookupsClosed) logger.warn({ err, layer: base.layers[cache.layer] }, 'cache lookup failed; the request runs on');
      },
    });
    const adaptation = createCacheAdaptation({
      model: cached,
      base,
      variants: chosen,
      exploration,
      probabilitiesOf,
      train,
      lookupRuntime,
      dir,
      random: seededRandom((options.seed ?? 1) + 1),
      group: config.group,
      sampled: config.sampled,
      window: config.window,
      period: config.period,
      minSamples: Math.min(50, config.window),
      accuracyTarget: config.accuracyTarget,
      ownsInitialCaches: true,
    });
    for (const row of original) adaptation.rememberRun(row.hidden, row.probabilities);
    serving = { cached, adaptation };
    phase = 'serving';
    logger.info(
      { exploreMs, expectedMs: composition.expectedMs, wholeMs: exploration.segmentMs.reduce((a, b) => a + b, exploration.stopMs), expectedAccuracy: composition.expectedAccuracy },
      `learned caches of ${model.name} serve: ${chosen.map((v) => `${v.name} at ${base.layers[v.layer]}`).join(', ')}`,
    );
  }

  /** Whole from now on; exploring again after `wait` requests, where re-exploration is on. */
  function runWhole(wait: number): void {
    phase = 'whole';
    wholeUntilExplore = config.reexplore > 0 ? wait : undefined;
  }
  /** Whole after an exploration that enabled none: exploring again later, each time later still. */
  function exploreLater(): void {
    runWhole(nextWait);
    nextWait = Math.min(nextWait * 2, MAX_REEXPLORE_FACTOR * config.reexplore);
  }
  const exploringAgain = () => (wholeUntilExplore === undefined ? '' : `, and explores again after ${wholeUntilExplore} requests`);

  /** Counts requests run whole; back to recording once re-exploration is due. */
  function ranWhole(size: number): void {
    if (wholeUntilExplore === undefined || closed) return;
    wholeUntilExplore -= size;
    if (wholeUntilExplore > 0) return;
    wholeUntilExplore = undefined;
    [recorded, recordedRows, phase] = [emptyRecord(base), 0, 'recording'];
  }

  /** Adaptation disabled every cache: they stop serving, and the model runs whole until the next exploration. */
  async function stopServing(stopped: NonNullable<typeof serving>): Promise<void> {
    if (serving !== stopped) return;
    serving = undefined;
    // The next caches' figures start afresh.
    streams.clear();
    runWhole(config.reexplore);
    logger.info({ accuracyTarget: config.accuracyTarget }, `every learned cache of ${model.name} stopped meeting the accuracy filter on the newest requests; the model runs whole${exploringAgain()}`);
    await stopped.adaptation.close();
  }

  function recordRun(ran: { outputs: NamedTensors; hidden: TensorData[] }, size: number): void {
    if (!recorded) return;
    if (recordedRows === 0) {
      // Within the memory bound, and enough for a fifth to measure each variant.
      const rowBytes = ran.hidden.reduce((n, t) => n + t.data.byteLength, 0) / size;
      toRecord = Math.min(config.explore, Math.floor(MAX_RECORDED_BYTES / rowBytes));
      if (toRecord < config.explore) logger.warn({ explore: config.explore, recorded: toRecord, rowBytes }, `cache.explore ${config.explore}: the layers' outputs of ${model.name} fit ${toRecord} requests in ${MAX_RECORDED_BYTES / 2 ** 20} MB; exploring on those`);
    }
    record(recorded, ran, probabilitiesOf);
    recordedRows += size;
    if (recordedRows < toRecord) return;
    const collected = recorded;
    recorded = undefined;
    phase = 'exploring';
    exploring = explore(collected).catch((err: unknown) => {
      exploreLater();
      if (!closed) logger.warn({ err }, `learned cache exploration of ${model.name} failed; the model runs whole${exploringAgain()}`);
    });
  }

  /** Hands a served request to the adaptation, in order, off the request's path. */
  function observe(figures: StreamFigures | undefined, feeds: () => NamedTensors, answered: CachedAnswer): void {
    if (!serving) return;
    const current = serving;
    const { adaptation } = current;
    pending += 1;
    observing = observing
      .then(async () => {
        if (closed || serving !== current) return;
        const label = await adaptation.observe(feeds, answered);
        if (adaptation.status().variants.length === 0) await stopServing(current);
        if (label === undefined || answered.exit === 'full' || !figures) return;
        const layer = streams.layer(figures, base.layers[answered.exit]!);
        layer.checked += 1;
        if (label === answered.answer) layer.checkedRight += 1;
      })
      .catch((err: unknown) => {
        if (closed) return;
        failures += 1;
        logger.warn({ err }, `learned cache adaptation of ${model.name} failed; the caches serving keep serving`);
      })
      .finally(() => (pending -= 1));
  }

  return {
    async run(input, keys) {
      const size = input.dims[0]!;
      if (phase === 'recording') {
        const ran = await base.runAll(feedsOf(input));
        recordRun(ran, size);
        return rowsOf(ran.outputs, size);
      }
      if (phase !== 'serving' || !serving) {
        const rows = rowsOf(await whole.run(feedsOf(input)), size);
        if (phase === 'whole') ranWhole(size);
        return rows;
      }
      // The adaptation samples requests after they are answered, and the runtime takes the batch's
      // buffers: the rows it has room for are kept.
      const width = input.data.length / size;
      const room = Math.max(0, Math.min(size, MAX_PENDING - pending));
      const kept = room > 0 ? (input.data.slice(0, width * room) as Float32Array) : undefined;
      if (room < size) {
        // Said the first time, then every thousand.
        if (Math.floor((unsampled + size - room) / 1000) > Math.floor(unsampled / 1000) || unsampled === 0) {
          logger.warn({ unsampled: unsampled + size - room }, `learned cache adaptation of ${model.name} falls behind the requests; those it has no room for are not sampled`);
        }
        unsampled += size - room;
      }
      const { answers } = await serving.cached.runBatch(feedsOf(input));
      const now = Date.now();
      return answers.map((answered, i) => {
        const figures = streams.served(keys[i] ?? '', now);
        if (kept && i < room) observe(figures, () => feedsOf({ ...input, dims: [1, ...input.dims.slice(1)], data: kept.slice(i * width, (i + 1) * width) }), answered);
        if (answered.exit === 'full') return rowsOf(answered.outputs!, 1)[0]!;
        const at = base.layers[answered.exit]!;
        if (figures) streams.layer(figures, at).hits += 1;
        return { answer: answered.answer, score: answered.score ?? 0, exit: { at, variant: answered.variant ?? '' }, predicted: answered.predicted };
      });
    },

    stats() {
      if (!serving) return [];
      const status = serving.adaptation.status();
      const variants = [...status.variants].sort((a, b) => a.layer - b.layer);
      // A layer's expected share of requests: what its hits add to those of the layers before it (GATI's effective hit rate).
      const effective = effectiveHitRates(variants);
      return streams.current(Date.now()).flatMap(([key, figures]) =>
        variants.map((v, i) => ({
          key,
          layer: base.layers[v.layer]!,
          variant: v.name,
          frames: figures.frames,
          hits: 0,
          checked: 0,
          checkedRight: 0,
          ...figures.layers.get(base.layers[v.layer]!),
          expectedHitRate: effective[i]!,
          expectedAccuracy: v.accuracy,
          retrains: status.retrains,
          retrainMs: status.meanRetrainMs,
          failedRetrains: failures + status.rejected,
        })),
      );
    },

    async close() {
      closed = true;
      closing.abort();
      await exploring;
      await observing;
      // Each step whatever the one before did; the first failure is thrown at the end.
      const steps = [
        async () => serving?.adaptation.close(),
        async () => base.dispose(),
        async () => {
          lookupsClosed = true;
          if (lookupRuntime !== runtime) await lookupRuntime.close();
        },
        async () => rm(dir, { recursive: true, force: true }),
      ];
      const failed: unknown[] = [];
      for (const step of steps) await step().catch((err: unknown) => failed.push(err));
      if (failed.length > 0) throw failed[0];
    },
  };
}
