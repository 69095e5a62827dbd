import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeOnnxModel, splitAtSharedPrefix, writePrefixBatch, type OnnxModel, type PrefixBatchFiles } from '../../analyzers/index.js';
import { seededRandom } from '../../scheduler/index.js';

/** Operators whose second input is a weight: the layers a head is made of. */
const WEIGHTED_OPS = new Set(['Conv', 'ConvTranspose', 'Gemm', 'MatMul']);
/** ONNX TensorProto.DataType.FLOAT. */
const FLOAT = 1;

export interface HeadOptions {
  /** How many models to make; model 0 keeps the original weights. */
  heads: number;
  /**
   * How many weighted layers, counted back from the outputs on every path, make a head.
   * @defaultValue 1
   */
  layers?: number;
  /**
   * Each head weight w becomes w * (1 + scale * u), u uniform in [-1, 1).
   * @defaultValue 0.1
   */
  scale?: number;
  /** @defaultValue 1 */
  seed?: number;
}

/**
 * The weights of a model's head: those of the weighted layers (Conv, Gemm, MatMul with an
 * initializer weight) followed by fewer than `layers` weighted layers on every path to an output.
 * For CenterNet and `layers` 1 these are the last 1x1 convolutions of the class and box branches.
 */
export function headWeights(model: OnnxModel, layers = 1): string[] {
  const graph = model.graph ?? {};
  const initializers = new Set((graph.initializer ?? []).map((t) => t.name ?? ''));
  const nodes = graph.node ?? [];
  // Weighted layers downstream of each tensor, at most; ONNX lists nodes in topological order.
  const after = new Map<string, number>();
  const weights: string[] = [];
  for (const node of [...nodes].reverse()) {
    const below = Math.max(0, ...(node.output ?? []).map((name) => after.get(name) ?? 0));
    const weight = node.input?.[1];
    const weighted = WEIGHTED_OPS.has(node.opType ?? '') && weight !== undefined && initializers.has(weight);
    if (weighted && below < layers) weights.push(weight);
    for (const name of node.input ?? []) after.set(name, Math.max(after.get(name) ?? 0, below + (weighted ? 1 : 0)));
  }
  if (weights.length === 0) throw new RangeError('headWeights: the model has no weighted layer (Conv, ConvTranspose, Gemm, MatMul with an initializer weight)');
  return [...new Set(weights)];
}

/**
 * `heads` models that share everything but their head (Nexus Fig. 15: variants that differ only
 * in the last layer): model 0 is `model`, model i > 0 has its head weights perturbed with seed
 * `seed + i`. The same options give the same models.
 */
export function buildHeads(model: OnnxModel, options: HeadOptions): OnnxModel[] {
  const { heads, layers = 1, scale = 0.1, seed = 1 } = options;
  if (!Number.isInteger(heads) || heads < 1) throw new RangeError(`buildHeads: heads must be a positive integer, got ${heads}`);
  const head = new Set(headWeights(model, layers));
  return Array.from({ length: heads }, (_, i) => {
    if (i === 0) return model;
    const random = seededRandom(seed + i);
    const graph = model.graph ?? {};
    // Only the head's initializers are copied; the rest are shared with `model`, never changed.
    const initializer = (graph.initializer ?? []).map((t) => {
      if (!head.has(t.name ?? '')) return t;
      if (t.dataType !== FLOAT || !t.rawData?.length) throw new RangeError(`buildHeads: head weight '${t.name}' is not float32 raw_data`);
      // A copy: decoded raw_data may be a view into the whole model file.
      const values = new Float32Array(new Uint8Array(t.rawData).buffer);
      for (let k = 0; k < values.length; k++) values[k]! *= 1 + scale * (2 * random() - 1);
      return { ...t, rawData: new Uint8Array(values.buffer) };
    });
    return { ...model, graph: { ...graph, initializer } };
  });
}

export interface WrittenHeads {
  /** `head-<i>.onnx`: the whole models. */
  models: string[];
  /** `prefix.onnx` and `suffix-<i>.onnx`: the same models split at their shared prefix. */
  split: PrefixBatchFiles;
}

/** Builds the heads and writes them, whole and split, into `dir`. */
export async function writeHeads(model: OnnxModel, dir: string, options: HeadOptions): Promise<WrittenHeads> {
  const heads = buildHeads(model, options);
  await mkdir(dir, { recursive: true });
  const models = await Promise.all(
    heads.map(async (head, i) => {
      const file = join(dir, `head-${i}.onnx`);
      await writeFile(file, encodeOnnxModel(head));
      return file;
    }),
  );
  // One head alone would be all prefix: split it where a second head differs, so its suffix is its head.
  const split = splitAtSharedPrefix(heads.length > 1 ? heads : buildHeads(model, { ...options, heads: 2 }));
  return { models, split: await writePrefixBatch({ prefix: split.prefix, members: split.members.slice(0, heads.length) }, dir) };
}
