import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, PanoptesError, type NodeOutput } from '../../core/index.js';
import { concat, loadSegmentedModel, rowOf, type SegmentedModel } from '../cache/index.js';
import { readOnnxModel, singleTensorCuts } from '../onnx/index.js';
import type { ModelRuntime, NamedTensors, TensorData } from '../runtime/index.js';
import type { Executed, Prepared } from './runner.js';

/**
 * Group-wise execution (research/edge-scheduling.md §2.2): the model cut into stages (the paper's
 * layer groups), each stage run as one batch over any requests that have reached it, so that a
 * request that started early can wait at a stage for later ones to catch up and merge. Requests
 * are prepared one by one and carry their own rows from stage to stage; the last stage's outputs
 * are decoded per request as the whole model's would be.
 */
export interface StagedModel {
  readonly stages: number;
  /** Each stage's share of the model's time at batch 2, measured when it loads (they sum to 1). */
  readonly shares: readonly number[];
  /** A request ready for stage 0: one image, prepared alone. */
  begin(prepared: Prepared): StagedItem;
  /** Runs `stage` on `items` (all waiting before it) as one batch; each then holds its next stage's input, or its outputs after the last. */
  run(stage: number, items: readonly StagedItem[]): Promise<void>;
  /** The answer of an item past the last stage. */
  end(item: StagedItem): Promise<NodeOutput>;
  dispose(): Promise<void>;
}

export interface StagedItem {
  readonly prepared: Prepared;
  /** What the next stage reads (one row), or the model's outputs once every stage has run. */
  tensors: NamedTensors;
}

/** What a runner tells `loadStagedModel` about itself: its phases around a plain model run. */
export interface Stageable<P extends Prepared, E extends Executed> {
  runtime: ModelRuntime;
  model: { name: string; file: string };
  /** The model's feeds for a prepared batch. */
  feeds(prepared: P): NamedTensors;
  /** What `executed` needs of a prepared batch, kept while its request is between stages: without the input, which the feeds carry. */
  kept(prepared: P): P;
  /** The batch as `execute` would have returned it, from the model's outputs. */
  executed(prepared: P, outputs: NamedTensors): E;
  finish(executed: E): NodeOutput[] | Promise<NodeOutput[]>;
  /** One blank image prepared, to time the stages on. */
  blank(): Promise<P>;
}

/** Timed runs of each stage, after one untimed. */
const TIMED_RUNS = 3;

/**
 * Cuts the model into `stages` at single-tensor cuts spread evenly over its nodes (our choice:
 * the paper groups layers by profile; the shares measured here tell the planner what each stage
 * costs). Fewer stages where the model has fewer places to cut.
 */
export async function loadStagedModel<P extends Prepared, E extends Executed>(stages: number, of: Stageable<P, E>): Promise<StagedModel> {
  const graph = await readOnnxModel(of.model.file);
  const cuts = singleTensorCuts(graph);
  const nodes = graph.graph?.node?.length ?? 0;
  const layers = [...new Set(Array.from({ length: stages - 1 }, (_, k) => nearestCut(cuts, ((k + 1) * nodes) / stages)))].filter((t) => t !== undefined);
  if (layers.length === 0) throw new PanoptesError(ErrorCode.ModelLoad, `${of.model.name} has no place to cut it into stages`);
  const dir = await mkdtemp(join(tmpdir(), 'panoptes-stages-'));
  let segmented: SegmentedModel;
  try {
    segmented = await loadSegmentedModel(of.runtime, { ...of.model, graph }, layers, dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const last = segmented.segments - 1;
  const staged: Omit<StagedModel, 'shares'> = {
    stages: segmented.segments,
    begin: (prepared) => ({ prepared: of.kept(prepared as P), tensors: of.feeds(prepared as P) }),
    async run(stage, items) {
      const input = stage === 0 ? concatFeeds(items.map((i) => i.tensors)) : concatRows(items.map((i) => i.tensors[layers[stage - 1]!]!));
      const outputs = await segmented.runSegment(stage, input);
      const rows = stage === last ? outputs : { [layers[stage]!]: outputs[layers[stage]!]! };
      for (const [name, t] of Object.entries(rows)) {
        // Rows are split on the first axis: a cut through a reshape would mix requests.
        if (t.dims[0] !== items.length) throw new PanoptesError(ErrorCode.ModelLoad, `${of.model.name}: stage ${stage}'s ${name} has ${t.dims[0]} rows for ${items.length} requests; it cannot be cut there`);
        if (t.type !== 'float32') throw new PanoptesError(ErrorCode.ModelLoad, `${of.model.name}: stage ${stage}'s ${name} is ${t.type}; stages carry float32 rows only`);
      }
      items.forEach((item, i) => (item.tensors = rowOf(rows, i)));
    },
    end: async (item) => (await of.finish(of.executed(item.prepared as P, item.tensors)))[0]!,
    dispose: () => segmented.dispose(),
  };
  try {
    return { ...staged, shares: await measureShares(staged, of) };
  } catch (err) {
    await staged.dispose();
    throw err;
  }
}

function nearestCut(cuts: readonly { tensor: string; node: number }[], node: number): string | undefined {
  let best: { tensor: string; node: number } | undefined;
  for (const cut of cuts) if (!best || Math.abs(cut.node - node) < Math.abs(best.node - node)) best = cut;
  return best?.tensor;
}

/** Each stage's share of the model's time at batch 2 (which also shows every cut keeps the batch on its first axis). */
async function measureShares<P extends Prepared, E extends Executed>(staged: Omit<StagedModel, 'shares'>, of: Stageable<P, E>): Promise<number[]> {
  const times = new Array<number>(staged.stages).fill(0);
  for (let run = 0; run <= TIMED_RUNS; run++) {
    const items = [staged.begin(await of.blank()), staged.begin(await of.blank())];
    for (let stage = 0; stage < staged.stages; stage++) {
      const started = performance.now();
      await staged.run(stage, items);
      if (run > 0) times[stage]! += performance.now() - started;
    }
  }
  const total = times.reduce((a, b) => a + b, 0);
  return times.map((t) => (total > 0 ? t / total : 1 / staged.stages));
}

const concatFeeds = (feeds: readonly NamedTensors[]): NamedTensors =>
  Object.fromEntries(Object.keys(feeds[0]!).map((name) => [name, concatRows(feeds.map((f) => f[name]!))]));

/** Float32 tensors of one or more rows each, stacked on the first axis into a new buffer (the runtime takes what it is given). */
function concatRows(parts: readonly TensorData[]): TensorData {
  const first = parts[0]!;
  return { type: first.type, dims: [parts.reduce((n, p) => n + p.dims[0]!, 0), ...first.dims.slice(1)], data: concat(parts.map((p) => p.data as Float32Array)) };
}
