// A learned cache for a detector node, GATI's parts fitted to a detector: for a stream's frame it
// predicts the objects of the stream's last frame the whole model ran on (the reference), and its
// selector, reading how an early feature map (a block output) changed since that frame, says
// whether they still hold; a fixed camera mostly films an unchanged scene, and those frames exit
// after the first segment. The lookup is synchronous (one small run whose answer the rest needs).
// The node's one selector is trained online on its streams' frame pairs (every frame the model
// runs on labels its pairs with the frames before it, and a share of the hits is run anyway to
// check them); a retrained selector, calibrated to the accuracy target, swaps in whole. A node
// starts from a selector learned on other footage where the model ships one (`frame-prior.ts`).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, PanoptesError, seededRandom, type CacheConfig } from '../../core/index.js';
import type { LoadedModel, ModelRuntime, NamedTensors, TensorData } from '../runtime/index.js';
import type { HeadJob, TrainedHead } from '../training/index.js';
import { encodeFrameSelector, fitFrameSelector, frameChange, frameGrid, frameGridWindow, FRAME_HIDDEN, FRAME_POOLED, FRAME_PROBABILITIES, FRAME_REFERENCE, type FittedSelector, type FramePairs } from './frame-selector.js';
import { Leases } from './leases.js';
import { loadWritten } from './lookup-model.js';
import { loadSegmentedModel, type SegmentedModel } from './segmented-model.js';
import { concat, pick } from './tensors.js';
import type { HiddenShape } from './variant.js';

/** The node's `cache:` (core/config/schema.ts says what each key means). */
export type FrameCacheConfig = CacheConfig;

export interface FrameCacheOptions<Answer> {
  runtime: ModelRuntime;
  model: { name: string; file: string };
  /** The candidate layer `config.layer` names: one of the model's block outputs (`blockOutputs`). */
  layer: string;
  config: FrameCacheConfig;
  train(job: HeadJob): Promise<TrainedHead>;
  /** Whether two frames' answers agree (a hit is right when they do). */
  same(a: Answer, b: Answer): boolean;
  seed?: number;
  /** A selector learned on other footage (`frame-prior.ts`) for this tensor and grid: it serves from the first frames. */
  prior?: FittedSelector;
}

/** How one row left the model. */
export interface FrameExit {
  /** The stream; rows without one always run whole and teach nothing. */
  readonly key: string | undefined;
  readonly frame: number;
  /** Answered by the cache: the reference's outputs. */
  readonly hit: boolean;
}

export interface FrameCacheStats {
  key: string;
  layer: string;
  variant: string;
  frames: number;
  hits: number;
  /** Hits run anyway, and of those the ones the cache had right. */
  checked: number;
  checkedRight: number;
  /** The selector's hit rate and accuracy on held-out pairs when it was calibrated (0 before). */
  expectedHitRate: number;
  expectedAccuracy: number;
  retrains: number;
  retrainMs: number;
  /** Retrainings that failed: the cache kept the selector it had. */
  failedRetrains: number;
}

export interface FrameCache<Answer> {
  /** The candidate layer's tensor, and the variant, as rows record them. */
  readonly layer: string;
  readonly variant: string;
  /**
   * The model on a batch, one stream key per row, and per row what its outputs' meaning depends
   * on besides the pixels (a detector's frame size: its boxes are mapped back through it). A
   * reference answers only rows of its own tag. Takes ownership of the feeds' buffers.
   */
  run(feeds: NamedTensors, keys: readonly (string | undefined)[], tags?: readonly string[]): Promise<{ outputs: NamedTensors; exits: FrameExit[] }>;
  /** Each row's final answer, in the order `run` gave the exits: labels the pairs, and retrains when due. */
  learn(exits: readonly FrameExit[], answers: readonly Answer[]): void;
  stats(): FrameCacheStats[];
  /** The labelled pairs in the window now (`npm run frame-cache-prior` learns the shipped prior from them). */
  pairs(): FramePairs;
  close(): Promise<void>;
}

interface Remembered<Answer> {
  frame: number;
  tag: string | undefined;
  /** The hidden output pooled over the selector's grid. */
  pooled: Float32Array;
  /** Its rows of the model's outputs, each without the batch dimension. */
  outputs: NamedTensors;
  answer?: Answer;
  /**
   * Its answer is the one of the frame the model ran on before it. Only such a frame answers for
   * others: a detector's answers flicker (an object near the score threshold comes and goes), and
   * a flicker reused would be wrong on every frame that reuses it.
   */
  stable?: boolean;
}

interface Selector {
  model: LoadedModel;
  threshold: number;
  expectedHitRate: number;
  expectedAccuracy: number;
  /** Learned on other footage (`frame-prior.ts`). */
  prior?: boolean;
}

interface Stream<Answer> {
  /** The frames the model last ran on, oldest first; the last is the reference. */
  recent: Remembered<Answer>[];
  /** Frames answered from the reference since it ran. */
  age: number;
  /** Pairs waiting for their frame's answer: (frame, earlier frame, |pooled − earlier pooled|). */
  pending: { frame: number; earlier: number; features: Float32Array }[];
  /** Checked frames: their pair with the reference they would have reused tells whether the hit was right. */
  checking: Set<number>;
  lastSeenMs: number;
  stats: Pick<FrameCacheStats, 'frames' | 'hits' | 'checked' | 'checkedRight'>;
}

/**
 * What the cache learns from all its streams: one selector for the node, as GATI's caches are
 * per model, trained on the pairs of every stream (a new stream is served from its third frame
 * once any stream taught the selector), while each stream keeps its own references.
 */
interface Learning {
  samples: { features: Float32Array; same: boolean }[];
  newSamples: number;
  selector?: Selector;
  /** Whether each of the latest checked hits was right. */
  checks: boolean[];
  training?: Promise<void>;
  stats: Pick<FrameCacheStats, 'retrains' | 'retrainMs' | 'failedRetrains'>;
}

/** Checked hits judged at a time; two wrong among them take the selector out until it is retrained. */
const CHECK_WINDOW = 20;
/** A stream not seen for this long is forgotten (a source removed, a replay ended). */
const IDLE_STREAM_MS = 10 * 60_000;

export async function createFrameCache<Answer>(options: FrameCacheOptions<Answer>): Promise<FrameCache<Answer>> {
  const { config, runtime, layer } = options;
  const dir = await mkdtemp(join(tmpdir(), 'panoptes-frame-cache-'));
  let base: SegmentedModel;
  try {
    base = await loadSegmentedModel(runtime, options.model, [layer], dir);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const random = seededRandom(options.seed ?? 1);
  const streams = new Map<string, Stream<Answer>>();
  const learning: Learning = { samples: [], newSamples: 0, checks: [], stats: { retrains: 0, retrainMs: 0, failedRetrains: 0 } };
  let shape: HiddenShape | undefined;
  let window = 1;
  /** Values of a pooled grid. */
  let pooledSize = 0;
  /** The selector's inputs. */
  let featureCount = 0;
  /** Selectors loaded, for unique names and files. */
  let versions = 0;
  /** Pools the hidden output of rows whose stream has no selector to look up with. */
  let untrained: LoadedModel | undefined;
  /** Selectors swapped out are disposed once no lookup runs on them. */
  const leases = new Leases<LoadedModel>();
  let nextFrame = 0;
  const variant = `Pool(${config.grid}×C) change`;

  const loadSelector = async (weights: Float32Array, bias: Float32Array): Promise<LoadedModel> => {
    const file = join(dir, `selector-${versions++}.onnx`);
    return loadWritten(runtime, `${options.model.name}@${config.layer}:frame-selector-${versions}`, file, encodeFrameSelector(shape!, window, { weights, bias }));
  };

  const streamOf = (key: string): Stream<Answer> => {
    let s = streams.get(key);
    if (!s) {
      s = { recent: [], age: 0, pending: [], checking: new Set(), lastSeenMs: Date.now(), stats: { frames: 0, hits: 0, checked: 0, checkedRight: 0 } };
      streams.set(key, s);
    }
    return s;
  };

  const forgetIdle = (now: number): void => {
    for (const [key, s] of streams) if (now - s.lastSeenMs >= IDLE_STREAM_MS) streams.delete(key);
  };

  const rowSize = (): number => shape!.channels * shape!.height * shape!.width;
  const hiddenTensor = (data: Float32Array): TensorData => ({ type: 'float32', data, dims: [data.length / rowSize(), shape!.channels, shape!.height, shape!.width] });

  /** Pools rows of the hidden output and, with a selector, looks them up against their references. */
  const lookup = async (model: LoadedModel, hidden: Float32Array, references: Float32Array) => {
    const grid = frameGrid(shape!, window);
    const out = await model.run({ [FRAME_HIDDEN]: hiddenTensor(hidden), [FRAME_REFERENCE]: { type: 'float32', data: references, dims: [references.length / pooledSize, grid.channels, grid.height, grid.width] } });
    return { pooled: out[FRAME_POOLED]!.data as Float32Array, probabilities: out[FRAME_PROBABILITIES]!.data as Float32Array };
  };

  const retrain = async (): Promise<void> => {
    const l = learning;
    l.newSamples = 0;
    const started = performance.now();
    const fitted = await fitFrameSelector([...l.samples], featureCount, config, options.train, l.stats.retrains + 1);
    const swappedOut = l.selector;
    // The prior serves on until the node's own pairs vouch for a selector (or checks take it out).
    if (!(swappedOut?.prior && swappedOut.threshold !== Infinity && fitted.threshold === Infinity)) {
      l.selector = { model: await loadSelector(fitted.weights, fitted.bias), threshold: fitted.threshold, expectedHitRate: fitted.expectedHitRate, expectedAccuracy: fitted.expectedAccuracy };
      // Swapped first: no lookup picks the old one while it is disposed.
      await leases.retire(swappedOut?.model);
      l.checks = [];
    }
    l.stats.retrains += 1;
    l.stats.retrainMs += performance.now() - started;
  };

  const maybeRetrain = (): void => {
    const l = learning;
    if (l.training) return;
    const same = l.samples.filter((p) => p.same).length;
    const enough = l.samples.length >= config.minPairs && Math.min(same, l.samples.length - same) >= config.minPairs / 10;
    const lagging = l.checks.length >= 2 && l.checks.filter((right) => !right).length >= 2;
    if (lagging && l.selector) l.selector = { ...l.selector, threshold: Infinity };
    if (!enough || !(lagging || l.newSamples >= config.period || !l.selector)) return;
    l.training = retrain()
      .catch(() => {
        l.stats.failedRetrains += 1;
      })
      .finally(() => (l.training = undefined));
  };

  /** The layer's shape, from its first output, and the selectors it decides: the untrained one, and the prior's, which serves until the node's own pairs vouch for one. */
  const setUp = async (dims: readonly number[]): Promise<void> => {
    const [, channels = 0, height = 0, width = 0] = dims;
    const { prior } = options;
    if (prior && prior.weights.length !== 4 * channels) {
      throw new PanoptesError(ErrorCode.ModelLoad, `${options.model.name}: the frame cache's prior reads ${prior.weights.length / 2} features, ${layer} gives ${2 * channels}`);
    }
    shape = { channels, height, width };
    window = frameGridWindow(shape, config.grid);
    const grid = frameGrid(shape, window);
    pooledSize = grid.channels * grid.height * grid.width;
    featureCount = 2 * channels;
    untrained = await loadSelector(new Float32Array(featureCount * 2), new Float32Array(2));
    if (prior) learning.selector = { model: await loadSelector(prior.weights, prior.bias), threshold: prior.threshold, expectedHitRate: prior.expectedHitRate, expectedAccuracy: prior.expectedAccuracy, prior: true };
  };
  let setup: Promise<void> | undefined;

  return {
    layer,
    variant,

    async run(feeds, keys, tags) {
      // Numbered as they come: on two model threads a later batch's first segment can end first.
      const frames = keys.map(() => nextFrame++);
      const hidden = (await base.runSegment(0, feeds))[layer]!;
      // Once, by the first batch (one beside it waits); one that failed is tried again by the next.
      await (setup ??= setUp(hidden.dims).catch((err: unknown) => {
        setup = undefined;
        throw err;
      }));
      const size = rowSize();
      const all = hidden.data as Float32Array;
      const now = Date.now();
      forgetIdle(now);
      for (const key of keys) if (key !== undefined) streamOf(key).lastSeenMs = now;
      const rows = keys.length;

      // Each stream's rows are pooled, and looked up where the stream has a vouched selector and a fresh reference.
      const hit = new Array<boolean>(rows).fill(false);
      const pooled = new Array<Float32Array | undefined>(rows);
      const byModel = new Map<LoadedModel, { selector?: Selector; members: number[] }>();
      // Each row's reference as it is looked up against: a batch beside this one may add a newer one meanwhile.
      const references = new Array<Remembered<Answer> | undefined>(rows);
      keys.forEach((key, i) => {
        if (key === undefined) return;
        const s = streams.get(key);
        const { selector } = learning;
        const latest = (references[i] = s?.recent.at(-1));
        const serving = selector && selector.threshold !== Infinity && latest?.stable && latest.tag === tags?.[i] && s!.age < config.maxAge ? selector : undefined;
        const model = serving?.model ?? untrained!;
        const group = byModel.get(model) ?? { ...(serving ? { selector: serving } : {}), members: [] };
        group.members.push(i);
        byModel.set(model, group);
      });
      // Held from now: a retraining that finishes during one group's lookup must not dispose another group's selector.
      const releases = [...byModel.keys()].map((model) => leases.acquire(model));
      try {
        for (const [model, { selector, members }] of byModel) {
          const looked = await lookup(model, pick(all, members, size), concat(members.map((i) => references[i]?.pooled ?? new Float32Array(pooledSize))));
          members.forEach((i, m) => {
            pooled[i] = looked.pooled.slice(m * pooledSize, (m + 1) * pooledSize);
            // Not a hit unless the selector says so: a NaN from a broken selector is a miss.
            if (!selector || !(looked.probabilities[2 * m + 1]! >= selector.threshold)) return;
            // A share of the hits runs whole anyway: their answers check the cache's.
            if (random() < config.verifyRate) streams.get(keys[i]!)!.checking.add(frames[i]!);
            else hit[i] = true;
          });
        }
      } finally {
        for (const release of releases) release();
      }

      const misses = keys.map((_, i) => i).filter((i) => !hit[i]);
      const rest = misses.length > 0 ? await base.runSegment(1, hiddenTensor(pick(all, misses, size))) : {};
      const missAt = new Map(misses.map((row, m) => [row, m]));
      const reference = (i: number) => references[i]!;
      // One row of each output, as a miss's rest or a hit's reference kept it.
      const rowOf = (i: number, name: string): TensorData => {
        const m = missAt.get(i);
        if (m === undefined) return reference(i).outputs[name]!;
        const { dims, type, data } = rest[name]!;
        const width = data.length / dims[0]!;
        return { type, dims: dims.slice(1), data: (data as Float32Array).slice(m * width, (m + 1) * width) };
      };
      const outputs: NamedTensors = {};
      for (const name of misses.length > 0 ? Object.keys(rest) : Object.keys(reference(0).outputs)) {
        const parts = keys.map((_, i) => rowOf(i, name));
        outputs[name] = { type: parts[0]!.type, dims: [rows, ...parts[0]!.dims], data: concat(parts.map((p) => p.data as Float32Array)) };
      }

      // Frames the model ran on become references, paired with the frames before them to learn from.
      for (const i of misses) {
        const key = keys[i];
        if (key === undefined) continue;
        const s = streamOf(key);
        const own = pooled[i]!;
        for (const r of s.recent.slice(-config.pairsPerFrame)) s.pending.push({ frame: frames[i]!, earlier: r.frame, features: frameChange(own, r.pooled, shape!.channels) });
        // In frame order: on two model threads a batch can end before the one started before it.
        const later = s.recent.findIndex((r) => r.frame > frames[i]!);
        s.recent.splice(later < 0 ? s.recent.length : later, 0, { frame: frames[i]!, tag: tags?.[i], pooled: own, outputs: Object.fromEntries(Object.keys(outputs).map((name) => [name, rowOf(i, name)])) });
        if (s.recent.length > config.pairsPerFrame) s.recent.shift();
        s.age = 0;
      }
      for (let i = 0; i < rows; i++) {
        const s = keys[i] === undefined ? undefined : streams.get(keys[i]!);
        if (!s) continue;
        s.stats.frames += 1;
        if (hit[i]) {
          s.stats.hits += 1;
          s.age += 1;
        }
      }
      return { outputs, exits: keys.map((key, i) => ({ key, frame: frames[i]!, hit: hit[i]! })) };
    },

    learn(exits, answers) {
      exits.forEach((exit, i) => {
        if (exit.key === undefined || exit.hit) return;
        const s = streams.get(exit.key);
        const own = s?.recent.find((r) => r.frame === exit.frame);
        if (!s || !own) return;
        own.answer = answers[i]!;
        // Stable: the answer of the frame run before it; either may be answered first (two threads).
        const answered = (frame: number | undefined) => s.recent.find((r) => r.frame === frame && r.answer !== undefined);
        const before = s.recent.filter((r) => r.frame < exit.frame).at(-1);
        const after = s.recent.find((r) => r.frame > exit.frame);
        if (before?.answer !== undefined) own.stable = options.same(own.answer, before.answer);
        if (after?.answer !== undefined) after.stable = options.same(after.answer, own.answer);
        // The pairs whose two frames are answered now; those with a frame no longer kept are let go.
        const ready = s.pending.filter((p) => (p.frame === exit.frame || p.earlier === exit.frame) && answered(p.frame) && answered(p.earlier));
        s.pending = s.pending.filter((p) => !ready.includes(p) && s.recent.some((r) => r.frame === p.earlier) && s.recent.some((r) => r.frame === p.frame));
        for (const pair of ready) {
          const same = options.same(answered(pair.frame)!.answer!, answered(pair.earlier)!.answer!);
          learning.samples.push({ features: pair.features, same });
          learning.newSamples += 1;
          // A checked hit was right when the frame's objects are its reference's: the latest frame before it.
          const reference = s.recent.filter((r) => r.frame < pair.frame).at(-1)?.frame;
          if (pair.earlier === reference && s.checking.delete(pair.frame)) {
            s.stats.checked += 1;
            if (same) s.stats.checkedRight += 1;
            learning.checks = [...learning.checks, same].slice(-CHECK_WINDOW);
          }
        }
        if (learning.samples.length > config.window) learning.samples.splice(0, learning.samples.length - config.window);
        maybeRetrain();
      });
    },

    stats: () =>
      [...streams].map(([key, s]) => ({
        key,
        layer,
        variant,
        ...s.stats,
        ...learning.stats,
        expectedHitRate: learning.selector?.expectedHitRate ?? 0,
        expectedAccuracy: learning.selector?.expectedAccuracy ?? 0,
      })),

    pairs: () => ({ featureCount, features: concat(learning.samples.map((p) => p.features)), same: learning.samples.map((p) => p.same) }),

    async close() {
      await learning.training;
      await learning.selector?.model.dispose();
      await untrained?.dispose();
      await base.dispose();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
