import { ErrorCode, PanoptesError, type ClassifierCacheConfig, type Logger, type ResolvedModel } from '../../core/index.js';
import { createClassifierCache, pick, type ClassifiedRow, type ClassifierCache, type FrameCacheStats } from '../cache/index.js';
import type { LoadedModel, ModelRuntime, NamedTensors, TensorData } from '../runtime/index.js';
import { createHeadTrainer, type HeadTrainer } from '../training/index.js';

/** Block outputs spread evenly over the model: the candidate layers a cache explores unless told. */
const DEFAULT_CACHE_LAYERS = 3;

/** A request's learned cache: the node's `cache:`, and the classes the cache answers, read from the model's outputs. */
export interface RequestCache {
  config: ClassifierCacheConfig;
  /** Requests of one key share a cache: the config and whatever else `probabilitiesOf` depends on. */
  key: string;
  /** Row-major [requests, classes]; the model's answer is the top class. */
  probabilitiesOf(outputs: NamedTensors): Float32Array;
}

export interface NodeCachesOptions<P> {
  spec: ResolvedModel;
  runtime: ModelRuntime;
  /** The model whole, loaded by its runner. */
  model: LoadedModel;
  inputName: string;
  inputSize: number;
  /** The model's block outputs: the layers a `cache.layers` index names. */
  candidateLayers: readonly string[];
  cacheOf(params: P): RequestCache | undefined;
  logger: Logger;
}

/** A batch's answers: `outputs` of the rows without a cache (`plain`, in order; all rows where undefined), `cached` those of the others. */
export interface NodeCachesBatch {
  size: number;
  outputs: NamedTensors | undefined;
  plain: number[] | undefined;
  cached: Map<number, ClassifiedRow> | undefined;
}

export interface NodeCaches<P> {
  /** A node's `cache.layers` that the model lacks, as an error; undefined where it has them all. */
  missingLayer(indices: readonly number[]): PanoptesError | undefined;
  execute(input: TensorData, params: readonly P[], streams: readonly (string | undefined)[] | undefined): Promise<NodeCachesBatch>;
  stats(): FrameCacheStats[];
  /** Stops exploring and retraining, then frees the caches; the model is its runner's to dispose. */
  close(): Promise<void>;
}

/**
 * The learned caches (GATI; docs/learned-caches.md) of one classifying model's app nodes: one per
 * distinct `RequestCache.key`, set up on first use, or undefined where it could not be (said
 * once; those rows run the model whole). A cheaper variant serving a node for a plan gets the
 * node's `cache:` too, with layers it may not have.
 */
export function createNodeCaches<P>(options: NodeCachesOptions<P>): NodeCaches<P> {
  const { spec, runtime, model, inputName, inputSize, candidateLayers, logger } = options;
  let trainer: HeadTrainer | undefined;
  const caches = new Map<string, Promise<ClassifierCache | undefined>>();
  let settled: ClassifierCache[] = [];

  const missingLayer = (indices: readonly number[]): PanoptesError | undefined => {
    const beyond = indices.find((i) => i >= candidateLayers.length);
    if (beyond === undefined) return undefined;
    return new PanoptesError(ErrorCode.AppInvalid, `cache.layers: ${spec.name} has candidate layers 0..${candidateLayers.length - 1}, not ${beyond} (docs/learned-caches.md)`, { details: { model: spec.name } });
  };

  const cacheFor = ({ config, key, probabilitiesOf }: RequestCache): Promise<ClassifierCache | undefined> => {
    let cache = caches.get(key);
    if (!cache) {
      const count = Math.min(DEFAULT_CACHE_LAYERS, candidateLayers.length);
      const indices = config.layers ?? Array.from({ length: count }, (_, i) => Math.floor(((i + 1) * candidateLayers.length) / (count + 1)));
      const missing = missingLayer(indices);
      cache = (missing
        ? Promise.reject(missing)
        : createClassifierCache({
            runtime,
            model: { name: spec.name, file: spec.file, inputName, inputSize },
            whole: model,
            layers: [...new Set(indices)].sort((a, b) => a - b).map((i) => candidateLayers[i]!),
            config,
            probabilitiesOf,
            train: async (job) => (trainer ??= createHeadTrainer()).trainCache(job),
            logger: logger.child({ module: 'analyzers.cache', model: spec.name }),
          })
      ).catch((err: unknown) => {
        logger.warn({ err, model: spec.name }, `learned cache of ${spec.name} not set up; its rows run the model whole`);
        return undefined;
      });
      caches.set(key, cache);
    }
    return cache;
  };

  return {
    missingLayer,
    async execute(input, params, streams) {
      const size = params.length;
      const requestCaches = params.map((p) => options.cacheOf(p));
      if (requestCaches.every((c) => !c)) return { size, outputs: await model.run({ [inputName]: input }), plain: undefined, cached: undefined };
      const width = input.data.length / size;
      const groups = new Map<string, { cache: ClassifierCache | undefined; rows: number[] }>();
      for (const [i, requestCache] of requestCaches.entries()) {
        const key = requestCache ? requestCache.key : '';
        const group = groups.get(key) ?? { cache: requestCache && (await cacheFor(requestCache)), rows: [] };
        group.rows.push(i);
        groups.set(key, group);
      }
      const rowsOf = (rows: readonly number[]): TensorData => ({ ...input, dims: [rows.length, ...input.dims.slice(1)], data: pick(input.data as Float32Array, rows, width) });
      const plain = [...groups.values()].filter((g) => !g.cache).flatMap((g) => g.rows).sort((a, b) => a - b);
      const cached = new Map<number, ClassifiedRow>();
      const [outputs] = await Promise.all([
        plain.length > 0 ? model.run({ [inputName]: rowsOf(plain) }) : undefined,
        ...[...groups.values()].map(async ({ cache, rows }) => {
          if (!cache) return;
          const answers = await cache.run(rowsOf(rows), rows.map((r) => streams?.[r] ?? ''));
          rows.forEach((r, i) => cached.set(r, answers[i]!));
        }),
      ]);
      settled = (await Promise.all(caches.values())).filter((c) => c !== undefined);
      return { size, outputs, plain, cached };
    },
    stats: () => settled.flatMap((c) => c.stats()),
    async close() {
      // Closing first stops exploring and retraining; closing the trainer then fails a job under way.
      const closing = (await Promise.all(caches.values())).map(async (c) => c?.close());
      await trainer?.close();
      await Promise.all(closing);
    },
  };
}
