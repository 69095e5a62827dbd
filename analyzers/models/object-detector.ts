import { z } from 'zod';
import { cacheSchema, ErrorCode, PanoptesError, type CacheConfig, type CacheExit, type Detection, type ModelSpec, type ResolvedModel } from '../../core/index.js';
import { concat, createFrameCache, framePriorFile, pick, readFramePrior, type FrameCache, type FrameExit } from '../cache/index.js';
import { blockOutputs, firstInputDims, readOnnxModel } from '../onnx/index.js';
import type { ModelRuntime, NamedTensors, TensorData } from '../runtime/index.js';
import { createHeadTrainer, type HeadTrainer } from '../training/index.js';
import { cocoLabels, decodeCenternet, letterboxBatchNative, nms, sameObjects } from './detector/index.js';
import { NO_INPUT, parseWith, phasedRunner, type ModelRunner } from './runner.js';

export const detectorParams = z.strictObject({
  minScore: z.number().min(0).max(1).default(0.3),
  /** Per-class thresholds that override `minScore`, e.g. `{ person: 0.3 }`. */
  minScores: z.record(z.string(), z.number().min(0).max(1)).default({}),
  /**
   * Renames classes as they come out, before `classes` and `minScores` apply, e.g.
   * `{ cell phone: car }` for cars filmed from straight above, which COCO models never saw and
   * call cell phones.
   */
  relabel: z.record(z.string(), z.string().min(1)).default({}),
  classes: z.array(z.string()).optional(),
  maxDetections: z.number().int().positive().max(1000).default(100),
  iouThreshold: z.number().min(0).max(1).default(0.5),
  /** One detection per object: among the wanted classes, overlapping boxes keep the best class only. */
  classAgnostic: z.boolean().default(true),
  /** The node's `cache:` (a learned cache), which the DAG runner passes here. */
  cache: cacheSchema.optional(),
});
type DetectorParams = z.infer<typeof detectorParams>;

/** Class names the params use that the model does not know, each at its key (`config check` and the runner say the same). */
export function unknownClasses(params: DetectorParams, spec: ModelSpec): { path: string; message: string }[] {
  const named = new Set([...cocoLabels, ...Object.values(params.relabel)]);
  const unknown = (name: string, path: string): { path: string; message: string } => ({ path, message: `got "${name}"; expected a class ${spec.name} knows (${spec.labels ?? 'coco'} names)` });
  return [
    ...Object.keys(params.relabel).filter((c) => !cocoLabels.includes(c)).map((c) => unknown(c, `relabel.${c}`)),
    ...(params.classes ?? []).flatMap((c, i) => (named.has(c) ? [] : [unknown(c, `classes[${i}]`)])),
    ...Object.keys(params.minScores).filter((c) => !named.has(c)).map((c) => unknown(c, `minScores.${c}`)),
  ];
}

/**
 * COCO object detection with CenterNet: letterbox, run, decode, then each node's own filter.
 * Rows of nodes with a `cache:` run through a frame cache per stream (docs/learned-caches.md).
 */
export async function loadObjectDetector(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner<DetectorParams>> {
  const inputSize = spec.inputSize ?? 512;
  const graph = await readOnnxModel(spec.file);
  // A file converted before CenterNet took any size says so here, not at its first run.
  const fixedSide = firstInputDims(graph)[1];
  if (fixedSide !== undefined && fixedSide !== inputSize) {
    throw new PanoptesError(ErrorCode.ModelLoad, `model ${spec.name}: ${spec.file} takes ${fixedSide} px only, not inputSize ${inputSize}; convert it again with tools/convert-models`, { details: { model: spec.name } });
  }
  const model = await runtime.load({ name: spec.name, file: spec.file });
  const inputName = model.inputNames[0] ?? 'images';
  /** Where a node's cache may read (`cache.layer` indexes these), checked with its params. */
  const candidateLayers = blockOutputs(graph);
  // Read at load: a malformed file fails the model here, naming itself, not every cached batch later.
  const prior = await readFramePrior(framePriorFile(spec.file));
  let trainer: HeadTrainer | undefined;
  /** One frame cache per distinct `cache:` among the nodes, each keeping its streams apart. */
  const caches = new Map<string, Promise<FrameCache<Detection[]>>>();
  const loadedCaches: FrameCache<Detection[]>[] = [];
  const cacheFor = (config: CacheConfig): Promise<FrameCache<Detection[]>> => {
    const id = JSON.stringify(config);
    let cache = caches.get(id);
    if (!cache) {
      const layer = candidateLayers[config.layer]!;
      // A selector learned on another tensor, grid or input size reads other features; one held to a laxer target than the node's would let it down.
      const fits = prior && prior.tensor === layer && prior.grid === config.grid && prior.inputSize === inputSize && prior.expectedAccuracy >= config.accuracyTarget;
      cache = createFrameCache<Detection[]>({
        runtime,
        model: spec,
        layer,
        config,
        train: async (job) => (trainer ??= createHeadTrainer()).train(job),
        same: (a, b) => sameObjects(a, b),
        ...(config.prior && fits ? { prior } : {}),
      });
      caches.set(id, cache);
      cache.then(
        (loaded) => loadedCaches.push(loaded),
        () => caches.delete(id),
      );
    }
    return cache;
  };

  /** The batch's rows grouped by the cache they run through (none: the whole model), each group one run. */
  const execute = async (input: TensorData, params: readonly DetectorParams[], streams: readonly (string | undefined)[] | undefined, sizes: readonly string[]) => {
    const groups = new Map<CacheConfig | undefined, number[]>();
    params.forEach((p, i) => {
      const config = streams?.[i] === undefined ? undefined : p.cache;
      groups.set(config, [...(groups.get(config) ?? []), i]);
    });
    if (groups.size === 1 && groups.has(undefined)) return { outputs: await model.run({ [inputName]: input }) };
    // A batch of one group (the usual case) runs on the input as it is.
    const pickRows = (rows: readonly number[]): TensorData =>
      groups.size === 1 ? input : { ...input, dims: [rows.length, ...input.dims.slice(1)], data: pick(input.data as Float32Array, rows, input.data.length / params.length) };
    const parts = await Promise.all(
      [...groups].map(async ([config, rows]) => {
        if (!config) return { rows, outputs: await model.run({ [inputName]: pickRows(rows) }), cache: undefined, exits: [] };
        const cache = await cacheFor(config);
        // A reference's boxes are model pixels, mapped back through the frame's letterbox: only a frame of its size may reuse them.
        const ran = await cache.run({ [inputName]: pickRows(rows) }, rows.map((r) => streams![r]), rows.map((r) => sizes[r]!));
        return { rows, cache, ...ran };
      }),
    );
    const exits: ({ cache: FrameCache<Detection[]>; exit: FrameExit } | undefined)[] = new Array(params.length).fill(undefined);
    for (const { cache, rows, exits: own } of parts) if (cache) rows.forEach((r, i) => (exits[r] = { cache, exit: own[i]! }));
    return { outputs: mergeRows(parts, params.length), exits };
  };

  return phasedRunner({
    spec,
    parseParams(params) {
      const parsed = parseWith(detectorParams, spec, params);
      const unknown = unknownClasses(parsed, spec);
      if (unknown.length > 0) throw new PanoptesError(ErrorCode.AppInvalid, `${unknown.map((u) => `params.${u.path}: ${u.message}`).join('; ')}`, { details: { model: spec.name } });
      if (parsed.cache && parsed.cache.layer >= candidateLayers.length) {
        throw new PanoptesError(ErrorCode.AppInvalid, `cache.layer ${parsed.cache.layer}: ${spec.name} has candidate layers 0..${candidateLayers.length - 1} (docs/learned-caches.md)`);
      }
      return parsed;
    },
    async prepare(images, params, streams) {
      const { input, letterboxes } = await letterboxBatchNative(images, inputSize, spec.name);
      return { size: images.length, input, letterboxes, params, streams, sizes: images.map((image) => `${image.width}x${image.height}`) };
    },
    async execute(prepared) {
      const { outputs, exits } = await execute(prepared.input, prepared.params, prepared.streams, prepared.sizes);
      return { size: prepared.size, outputs, letterboxes: prepared.letterboxes, params: prepared.params, exits };
    },
    finish({ outputs, letterboxes, params, exits }) {
      // Decode once with the loosest settings of the batch, then apply each request's own.
      const perImage = decodeCenternet(outputs, letterboxes, {
        minScore: Math.min(...params.flatMap((p) => [p.minScore, ...Object.values(p.minScores)])),
        maxDetections: Math.max(...params.map((p) => p.maxDetections)),
        iouThreshold: Math.max(...params.map((p) => p.iouThreshold)),
      });
      const outputsOf = perImage.map((detections, i) => {
        const p = params[i]!;
        const wanted = p.classes ? new Set(p.classes) : undefined;
        const renamed = detections.map((d) => {
          const className = p.relabel[d.className];
          return className === undefined ? d : { ...d, className, classId: cocoLabels.includes(className) ? cocoLabels.indexOf(className) : d.classId };
        });
        const kept = renamed.filter((d) => d.score >= (p.minScores[d.className] ?? p.minScore) && (!wanted || wanted.has(d.className)));
        const exit = exits?.[i];
        return {
          kind: 'detections' as const,
          detections: nms(kept, { iouThreshold: p.iouThreshold, maxDetections: p.maxDetections, classAgnostic: p.classAgnostic }),
          ...(exit ? { exit: { at: exit.exit.hit ? exit.cache.layer : 'full', variant: exit.cache.variant } satisfies CacheExit } : {}),
        };
      });
      // What the cached rows finally answered teaches their caches.
      for (const cache of new Set(exits?.flatMap((e) => (e ? [e.cache] : [])))) {
        const rows = outputsOf.flatMap((o, i) => (exits![i]?.cache === cache ? [i] : []));
        cache.learn(rows.map((i) => exits![i]!.exit), rows.map((i) => outputsOf[i]!.detections));
      }
      return outputsOf;
    },
    cacheStats: () => loadedCaches.flatMap((c) => c.stats()),
    framePairs: () => {
      const all = loadedCaches.map((c) => c.pairs());
      const featureCount = all[0]?.featureCount ?? 0;
      if (all.some((p) => p.featureCount !== featureCount)) throw new PanoptesError(ErrorCode.AppInvalid, `${spec.name}: its frame caches read layers of different widths; their pairs do not mix`);
      return { featureCount, features: concat(all.map((p) => p.features)), same: all.flatMap((p) => p.same) };
    },
    // In stages, a node's `cache:` does not apply: the deployment refuses the two together.
    stageable: {
      runtime,
      model: spec,
      feeds: ({ input }) => ({ [inputName]: input }),
      kept: (prepared) => ({ ...prepared, input: NO_INPUT }),
      executed: ({ size, letterboxes, params }, outputs) => ({ size, outputs, letterboxes, params, exits: undefined }),
    },
    async dispose() {
      const loaded = await Promise.allSettled(caches.values());
      await Promise.all(loaded.map(async (c) => (c.status === 'fulfilled' ? c.value.close() : undefined)));
      await trainer?.close();
      await model.dispose();
    },
  });
}

/** The groups' outputs back in the batch's row order. */
function mergeRows(parts: readonly { rows: readonly number[]; outputs: NamedTensors }[], rows: number): NamedTensors {
  if (parts.length === 1) return parts[0]!.outputs;
  const merged: NamedTensors = {};
  for (const name of Object.keys(parts[0]!.outputs)) {
    const sample = parts[0]!.outputs[name]!;
    const width = sample.data.length / sample.dims[0]!;
    const data = new Float32Array(rows * width);
    for (const part of parts) {
      const values = part.outputs[name]!.data as Float32Array;
      part.rows.forEach((r, i) => data.set(values.subarray(i * width, (i + 1) * width), r * width));
    }
    merged[name] = { ...sample, dims: [rows, ...sample.dims.slice(1)], data };
  }
  return merged;
}
