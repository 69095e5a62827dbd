import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeOnnxModel, readOnnxModel, segmentModel, type OnnxModel } from '../onnx/index.js';
import type { LoadedModel, ModelRuntime, NamedTensors, TensorData } from '../runtime/index.js';
import { copyTensor } from './tensors.js';

/**
 * A model loaded as segments cut at hidden layers (GATI §4: the base model runs layer by layer,
 * and a hidden output is handed to the cache after its segment): segment k reads `layers[k − 1]`
 * (segment 0 the model's inputs) and outputs `layers[k]` (the last one the model's outputs).
 */
export interface SegmentedModel {
  readonly name: string;
  readonly layers: readonly string[];
  readonly segments: number;
  /** Runs segment k; for k > 0 `input` is the hidden output of segment k − 1. Takes ownership of the buffers. */
  runSegment(k: number, input: NamedTensors | TensorData): Promise<NamedTensors>;
  /** The mean time of one run of segment k on `input` (`meanRunMs`). */
  timeSegment(k: number, input: () => NamedTensors | TensorData, runs: number): Promise<number>;
  /**
   * Runs segments `from`..`to` as one, where no cache reads the layers between: one run of a model
   * cut only at their ends, where `prepareRange` has loaded it; segment by segment otherwise. Each
   * cut costs about a millisecond (a run's setup and a hand-off to the model's thread and back).
   */
  runRange(from: number, to: number, input: NamedTensors | TensorData): Promise<NamedTensors>;
  /**
   * Loads the model of segments `from`..`to` merged, for `runRange`; resolves once it serves, or
   * once loading failed (said to `onLoadError`; that range then runs segment by segment). Kept
   * until `dispose`.
   */
  prepareRange(from: number, to: number): Promise<void>;
  /** The whole model segment by segment, with the hidden output of every layer (copies). */
  runAll(feeds: NamedTensors): Promise<{ outputs: NamedTensors; hidden: TensorData[] }>;
  dispose(): Promise<void>;
}

/**
 * The mean time of one run of `model` on `feeds`: timed on its thread where the runtime can
 * (apart from other work there), else from `runs` calls made at once (after one alone, untimed):
 * they queue together, so the time from the first's end to the last's is `runs − 1` calls,
 * whatever they waited for before. Timed alone, a call online waits behind the app's batches (a
 * 0.5 ms lookup was timed at 38–219 ms that way); with two model threads even calls made at once
 * do, on the thread that runs a batch meanwhile (a 0.07 ms lookup was timed at 8–10 ms).
 */
export async function meanRunMs(model: LoadedModel, feeds: () => NamedTensors, runs: number): Promise<number> {
  if (model.time) return model.time(feeds(), runs);
  await model.run(feeds());
  const ends: number[] = [];
  const calls = Math.max(2, runs);
  await Promise.all(Array.from({ length: calls }, async () => model.run(feeds()).then(() => ends.push(performance.now()))));
  return (Math.max(...ends) - Math.min(...ends)) / (calls - 1);
}

/** Cuts `file` (its graph, where the caller has read it already) at `layers`, writes the segments to `dir` and loads them in `runtime`. */
export async function loadSegmentedModel(
  runtime: ModelRuntime,
  model: { name: string; file: string; graph?: OnnxModel },
  layers: readonly string[],
  dir: string,
  onLoadError: (err: unknown, range: string) => void = () => {},
): Promise<SegmentedModel> {
  const parts = segmentModel(model.graph ?? (await readOnnxModel(model.file)), layers);
  await mkdir(dir, { recursive: true });
  const loaded: LoadedModel[] = [];
  try {
    for (const [k, part] of parts.entries()) {
      const file = join(dir, `${model.name}.segment-${k}.onnx`);
      await writeFile(file, encodeOnnxModel(part));
      loaded.push(await runtime.load({ name: `${model.name}#${k}`, file }));
    }
  } catch (err) {
    await Promise.all(loaded.map(async (m) => m.dispose()));
    throw err;
  }
  const feedsOf = (from: number, input: NamedTensors | TensorData): NamedTensors => (from === 0 ? (input as NamedTensors) : { [layers[from - 1]!]: input as TensorData });
  const segmentAt = (k: number): LoadedModel => {
    const segment = loaded[k];
    if (!segment) throw new RangeError(`${model.name} has segments 0..${loaded.length - 1}, not ${k}`);
    return segment;
  };
  const runSegment = async (k: number, input: NamedTensors | TensorData): Promise<NamedTensors> => segmentAt(k).run(feedsOf(k, input));
  /** Segments merged, by `from-to`, once loaded; and the loads begun. */
  const merged = new Map<string, LoadedModel>();
  const loading = new Map<string, Promise<void>>();
  let disposed = false;
  const checkRange = (from: number, to: number): void => {
    if (!(from >= 0 && from <= to && to < loaded.length)) throw new RangeError(`${model.name} has segments 0..${loaded.length - 1}, not ${from}..${to}`);
  };
  const loadMerged = async (from: number, to: number, key: string): Promise<void> => {
    // The cuts between `from` and `to` left out: the part at `from` is the range.
    const part = segmentModel(model.graph ?? (await readOnnxModel(model.file)), layers.filter((_, i) => i < from || i >= to))[from]!;
    const file = join(dir, `${model.name}.segments-${key}.onnx`);
    await writeFile(file, encodeOnnxModel(part));
    merged.set(key, await runtime.load({ name: `${model.name}#${key}`, file }));
  };
  const prepareRange = (from: number, to: number): Promise<void> => {
    checkRange(from, to);
    const key = `${from}-${to}`;
    let load = loading.get(key);
    if (!load && from < to && !disposed) loading.set(key, (load = loadMerged(from, to, key).catch((err: unknown) => onLoadError(err, key))));
    return load ?? Promise.resolve();
  };
  const runRange = async (from: number, to: number, input: NamedTensors | TensorData): Promise<NamedTensors> => {
    if (from === to) return runSegment(from, input);
    checkRange(from, to);
    const range = merged.get(`${from}-${to}`);
    if (range) return range.run(feedsOf(from, input));
    let outputs = await runSegment(from, input);
    for (let k = from + 1; k <= to; k++) outputs = await runSegment(k, outputs[layers[k - 1]!]!);
    return outputs;
  };
  return {
    name: model.name,
    layers,
    segments: loaded.length,
    runSegment,
    timeSegment: async (k, input, runs) => meanRunMs(segmentAt(k), () => feedsOf(k, input()), runs),
    runRange,
    prepareRange,
    async runAll(feeds) {
      const hidden: TensorData[] = [];
      let outputs = await runSegment(0, feeds);
      for (let k = 1; k < loaded.length; k++) {
        const layer = outputs[layers[k - 1]!]!;
        hidden.push(copyTensor(layer));
        outputs = await runSegment(k, layer);
      }
      return { outputs, hidden };
    },
    async dispose() {
      disposed = true;
      await Promise.all(loading.values());
      await Promise.all([...loaded, ...merged.values()].map(async (m) => m.dispose()));
    },
  };
}
