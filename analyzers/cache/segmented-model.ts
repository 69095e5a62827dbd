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
  /** The whole model segment by segment, with the hidden output of every layer (copies). */
  runAll(feeds: NamedTensors): Promise<{ outputs: NamedTensors; hidden: TensorData[] }>;
  dispose(): Promise<void>;
}

/** Cuts `file` (its graph, where the caller has read it already) at `layers`, writes the segments to `dir` and loads them in `runtime`. */
export async function loadSegmentedModel(runtime: ModelRuntime, model: { name: string; file: string; graph?: OnnxModel }, layers: readonly string[], dir: string): Promise<SegmentedModel> {
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
  const runSegment = async (k: number, input: NamedTensors | TensorData): Promise<NamedTensors> => {
    const segment = loaded[k];
    if (!segment) throw new RangeError(`${model.name} has segments 0..${loaded.length - 1}, not ${k}`);
    return segment.run(k === 0 ? (input as NamedTensors) : { [layers[k - 1]!]: input as TensorData });
  };
  return {
    name: model.name,
    layers,
    segments: loaded.length,
    runSegment,
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
      await Promise.all(loaded.map(async (m) => m.dispose()));
    },
  };
}
