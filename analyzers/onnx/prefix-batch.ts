import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCode, PanoptesError } from '../../core/index.js';
import type { LoadedModel, ModelRuntime, NamedTensors, TensorData } from '../runtime/index.js';
import { hashGraph } from './graph-hash.js';
import { encodeOnnxModel, feedInputs, graphOf, type OnnxModel } from './onnx-model.js';
import { sharedPrefix } from './shared-prefix.js';
import { extractSubgraph } from './subgraph.js';

/** One member of a prefix-batched model: its own suffix, fed by the shared prefix. */
export interface PrefixMember<Model> {
  /** From the cut tensors (and any model input it reads directly) to the member's outputs. */
  readonly suffix: Model;
  /** The prefix output that feeds each cut input of the suffix, by name. Other suffix inputs are model inputs. */
  readonly cut: Readonly<Record<string, string>>;
}

/** Models that share a prefix, split for prefix batching (Nexus §6.3). */
export interface PrefixBatch<Model> {
  /** From the members' inputs to the cut tensors; it holds the shared weights, once. */
  readonly prefix: Model;
  readonly members: readonly PrefixMember<Model>[];
}

/** A prefix batch on disk, as the model runtime loads it. */
export type PrefixBatchFiles = PrefixBatch<string>;

/**
 * Splits models at the prefix they share. The prefix is taken from the first model; the members
 * must feed the same inputs by the same names, since one union batch feeds the prefix.
 */
export function splitAtSharedPrefix(models: readonly OnnxModel[]): PrefixBatch<OnnxModel> {
  const inputNames = models.map((model) => feedInputs(graphOf(model)).map((v) => v.name ?? '').join(', '));
  if (new Set(inputNames).size > 1) {
    throw new PanoptesError(ErrorCode.ModelLoad, `prefix batching needs members with the same inputs, got (${inputNames.join(') and (')})`, {
      details: { inputs: inputNames },
    });
  }
  const shared = sharedPrefix(models.map(hashGraph));
  const cutNames = (member: number): string[] => shared.cut.flatMap((c) => c.names[member] ?? []);
  const prefix = extractSubgraph(models[0]!, { inputs: [], outputs: cutNames(0) });
  const members = models.map((model, i) => {
    // The first name of each cut tensor in the first model is what the prefix outputs it as.
    const cut = Object.fromEntries(shared.cut.flatMap((c) => (c.names[i] ?? []).map((name) => [name, c.names[0]?.[0] ?? ''])));
    const outputs = (graphOf(model).output ?? []).map((v) => v.name ?? '');
    return { suffix: extractSubgraph(model, { inputs: cutNames(i), outputs }), cut };
  });
  return { prefix, members };
}

/** Writes `split` into `dir` as `prefix.onnx` and `suffix-<i>.onnx`. */
export async function writePrefixBatch(split: PrefixBatch<OnnxModel>, dir: string): Promise<PrefixBatchFiles> {
  await mkdir(dir, { recursive: true });
  const write = async (model: OnnxModel, name: string): Promise<string> => {
    const file = join(dir, name);
    await writeFile(file, encodeOnnxModel(model));
    return file;
  };
  return {
    prefix: await write(split.prefix, 'prefix.onnx'),
    members: await Promise.all(split.members.map(async ({ suffix, cut }, i) => ({ suffix: await write(suffix, `suffix-${i}.onnx`), cut }))),
  };
}

export interface PrefixBatchedModel {
  readonly name: string;
  /** What every member is fed (the prefix's inputs). */
  readonly inputNames: readonly string[];
  /** Per member, in order, what it outputs. */
  readonly outputNames: readonly (readonly string[])[];
  /**
   * Runs each member on its own rows (`perMember[i]` for member `i`, the batch along dim 0): the
   * prefix once on the union of all rows, then each suffix, one after the other, on its slice of
   * the cut tensors. A member given no rows gets `{}` and its suffix does not run. Takes ownership
   * of the feeds' buffers, as `LoadedModel.run` does.
   */
  run(perMember: readonly NamedTensors[]): Promise<NamedTensors[]>;
  dispose(): Promise<void>;
}

/** Loads the prefix once and each member's suffix, through the model runtime; on a failure, disposes what it loaded. */
export async function loadPrefixBatched(runtime: ModelRuntime, model: { name: string; files: PrefixBatchFiles }): Promise<PrefixBatchedModel> {
  const { name, files } = model;
  const loaded: LoadedModel[] = [];
  try {
    loaded.push(await runtime.load({ name: `${name}/prefix`, file: files.prefix }));
    for (const [i, { suffix }] of files.members.entries()) loaded.push(await runtime.load({ name: `${name}/suffix-${i}`, file: suffix }));
  } catch (err) {
    await Promise.all(loaded.map((m) => m.dispose()));
    throw err;
  }
  const [prefix, ...suffixes] = loaded as [LoadedModel, ...LoadedModel[]];
  return {
    name,
    inputNames: prefix.inputNames,
    outputNames: suffixes.map((s) => s.outputNames),
    async run(perMember) {
      if (perMember.length !== suffixes.length) {
        throw new RangeError(`${name}: run takes one set of feeds per member (${suffixes.length}), got ${perMember.length}`);
      }
      const rows = perMember.map((feeds, member) => rowsOf(feeds, prefix.inputNames, `${name} member ${member}`));
      const given = perMember.filter((_, member) => rows[member]! > 0);
      if (given.length === 0) return perMember.map(() => ({}));
      const union = Object.fromEntries(prefix.inputNames.map((input) => [input, concatRows(given.map((feeds) => feeds[input]!))]));
      const cut = await prefix.run(union);

      /** A suffix reads its rows of the cut tensors, and any model input from its member's own feeds. */
      const suffixFeeds = (member: number, start: number, end: number): NamedTensors =>
        Object.fromEntries(
          suffixes[member]!.inputNames.map((input) => {
            const prefixOutput = files.members[member]!.cut[input];
            const tensor = prefixOutput === undefined ? perMember[member]![input] : cut[prefixOutput];
            if (!tensor) throw new PanoptesError(ErrorCode.ModelRun, `${name}: nothing feeds input '${input}' of suffix ${member}`, { details: { input, member } });
            return [input, prefixOutput === undefined ? tensor : sliceRows(tensor, start, end)];
          }),
        );

      const outputs: NamedTensors[] = [];
      let start = 0;
      for (const [member, suffix] of suffixes.entries()) {
        const end = start + rows[member]!;
        outputs.push(end > start ? await suffix.run(suffixFeeds(member, start, end)) : {});
        start = end;
      }
      return outputs;
    },
    async dispose() {
      await Promise.all(loaded.map((m) => m.dispose()));
    },
  };
}

/** The rows (dim 0) a member's feeds hold: the same in every input; none for no feeds (`{}`). */
export function rowsOf(feeds: NamedTensors, inputs: readonly string[], who: string): number {
  if (Object.keys(feeds).length === 0) return 0;
  const counts = inputs.map((input) => {
    const tensor = feeds[input];
    if (!tensor) throw new RangeError(`${who}: no feed for input '${input}'`);
    return tensor.dims[0] ?? 0;
  });
  if (new Set(counts).size > 1) throw new RangeError(`${who}: inputs disagree on the batch (${counts.join(', ')} rows)`);
  return counts[0] ?? 0;
}

const VIEWS = {
  float32: (bytes: ArrayBuffer) => new Float32Array(bytes),
  int32: (bytes: ArrayBuffer) => new Int32Array(bytes),
  int64: (bytes: ArrayBuffer) => new BigInt64Array(bytes),
  uint8: (bytes: ArrayBuffer) => new Uint8Array(bytes),
} satisfies Record<TensorData['type'], (bytes: ArrayBuffer) => TensorData['data']>;

/** Stacks tensors along dim 0 into a new buffer (the members' own stay theirs: a suffix may read a model input). */
export function concatRows(tensors: readonly TensorData[]): TensorData {
  const [first] = tensors;
  if (!first) throw new RangeError('concatRows: no tensors');
  const rowShape = first.dims.slice(1).join(',');
  const mismatch = tensors.find((t) => t.type !== first.type || t.dims.slice(1).join(',') !== rowShape);
  if (mismatch) throw new RangeError(`concatRows: a ${mismatch.type} [${mismatch.dims.join(', ')}] does not stack on a ${first.type} [${first.dims.join(', ')}]`);
  const bytes = new Uint8Array(tensors.reduce((sum, t) => sum + t.data.byteLength, 0));
  let offset = 0;
  for (const { data } of tensors) {
    bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), offset);
    offset += data.byteLength;
  }
  const rows = tensors.reduce((sum, t) => sum + (t.dims[0] ?? 0), 0);
  return { type: first.type, dims: [rows, ...first.dims.slice(1)], data: VIEWS[first.type](bytes.buffer) };
}

/**
 * Rows `start` to `end` of a tensor. A slice is a copy: the runtime moves a buffer to its worker
 * whole, so two members cannot share one. The whole tensor is passed as it is.
 */
function sliceRows(tensor: TensorData, start: number, end: number): TensorData {
  const rows = tensor.dims[0] ?? 0;
  if (start === 0 && end === rows) return tensor;
  const rowLength = tensor.data.length / rows;
  return { type: tensor.type, dims: [end - start, ...tensor.dims.slice(1)], data: tensor.data.slice(start * rowLength, end * rowLength) };
}
