import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCode, PanoptesError } from '../../core/index.js';
import type { ModelRuntime, NamedTensors } from '../runtime/index.js';
import { encodeOnnxModel, feedInputs, graphOf, intAttribute, type OnnxGraph, type OnnxModel, type OnnxNode, type OnnxValueInfo } from './onnx-model.js';
import { concatRows, rowsOf, type PrefixBatch, type PrefixBatchedModel } from './prefix-batch.js';

/**
 * A prefix batch as one ONNX graph: the shared prefix on the union of the batch, a Split of each
 * cut tensor along the batch by how many rows each member has, and each member's suffix on its
 * slice. One run of one session, so the cut tensors (CenterNet's: 16 MB an image) never leave
 * the runtime; run as separate prefix and suffix sessions they cross threads and are copied.
 * Each suffix sits in an If on its member having rows: onnxruntime runs every node of a graph
 * whatever outputs are asked for, and a suffix on zero rows can fail (a Reshape to -1).
 */

/** The extra input: rows per member, in member order (int64 [members]). */
export const MEMBER_ROWS = 'panoptes_member_rows';
/** ONNX TensorProto.DataType.INT64 and BOOL, AttributeProto.AttributeType TENSOR and GRAPH. */
const INT64 = 7;
const TENSOR_ATTRIBUTE = 4;
const GRAPH_ATTRIBUTE = 5;

const sliceName = (tensor: string, member: number): string => `${tensor}#${member}`;
const memberName = (tensor: string, member: number): string => (tensor === '' ? '' : `m${member}/${tensor}`);

export interface MergedPrefixBatch {
  model: OnnxModel;
  /** Per member, in order: its outputs' own names. The graph outputs them as `m<i>/<name>`. */
  outputs: string[][];
}

export function mergePrefixBatch(split: PrefixBatch<OnnxModel>): MergedPrefixBatch {
  const prefix = graphOf(split.prefix);
  const cuts = (prefix.output ?? []).map((v) => v.name ?? '');
  const members = split.members.length;
  const splits: OnnxNode[] = cuts.map((cut) => ({
    opType: 'Split',
    name: `panoptes_split/${cut}`,
    input: [cut, MEMBER_ROWS],
    output: Array.from({ length: members }, (_, i) => sliceName(cut, i)),
    attribute: [intAttribute('axis', 0)],
  }));
  const suffixes = split.members.map(({ suffix, cut }, i) => memberSuffix(graphOf(suffix), cut, i));
  const rows: OnnxValueInfo = { name: MEMBER_ROWS, type: { tensorType: { elemType: INT64, shape: { dim: [{ dimValue: members }] } } } };
  const model: OnnxModel = {
    ...split.prefix,
    graph: {
      ...prefix,
      name: 'panoptes_prefix_batch',
      node: [...(prefix.node ?? []), ...splits, ...suffixes.flatMap((s) => s.nodes)],
      input: [...(prefix.input ?? []), rows],
      output: suffixes.flatMap((s) => s.outputs),
    },
  };
  return { model, outputs: suffixes.map((s) => s.names) };
}

/**
 * Member `i`'s suffix, its tensors renamed `m<i>/…` and its cut inputs read from its slices, as
 * an If on `MEMBER_ROWS[i] > 0` whose other branch gives empty outputs.
 */
function memberSuffix(graph: OnnxGraph, cut: Readonly<Record<string, string>>, i: number): { nodes: OnnxNode[]; outputs: OnnxValueInfo[]; names: string[] } {
  const direct = feedInputs(graph).map((v) => v.name ?? '').filter((name) => cut[name] === undefined);
  if (direct.length > 0) {
    throw new PanoptesError(ErrorCode.ModelLoad, `member ${i}'s suffix reads model input ${direct.join(', ')} directly; a merged prefix batch feeds suffixes only from the prefix`);
  }
  if ((graph.node ?? []).some((n) => (n.attribute ?? []).some((a) => a.g || a.graphs?.length))) {
    throw new PanoptesError(ErrorCode.ModelLoad, `member ${i}'s suffix has subgraphs (If, Loop, Scan), which merging does not rename`);
  }
  const rename = (name: string): string => (cut[name] !== undefined ? sliceName(cut[name], i) : memberName(name, i));
  // Symbolic dims are the member's own: its slice's batch is not the union's.
  const typed = (v: OnnxValueInfo): OnnxValueInfo => {
    const tensor = v.type?.tensorType;
    const dim = tensor?.shape?.dim?.map((d) => (d.dimParam ? { dimParam: `${d.dimParam}_m${i}` } : d));
    return { name: rename(v.name ?? ''), type: { tensorType: { ...tensor, ...(dim ? { shape: { dim } } : {}) } } };
  };
  const outputs = (graph.output ?? []).map(typed);
  const nodes = (graph.node ?? []).map((n): OnnxNode => ({ ...n, name: memberName(n.name ?? 'node', i), input: (n.input ?? []).map(rename), output: (n.output ?? []).map(rename) }));
  // An output the prefix computes (a cut tensor) is copied inside the branch: a branch may not return an outer value as it is.
  outputs.forEach((o, k) => {
    const name = (graph.output ?? [])[k]?.name ?? '';
    if (cut[name] === undefined) return;
    const own = memberName(name, i);
    nodes.push({ opType: 'Identity', name: `${own}/identity`, input: [o.name ?? ''], output: [own] });
    outputs[k] = { ...o, name: own };
  });
  const run: OnnxGraph = { name: `m${i}/suffix`, node: nodes, initializer: (graph.initializer ?? []).map((t) => ({ ...t, name: rename(t.name ?? '') })), output: outputs };
  // No rows: outputs with no elements, of each output's type and rank.
  const empty: OnnxGraph = {
    name: `m${i}/empty`,
    node: outputs.map((o) => ({
      opType: 'Constant',
      name: `${o.name ?? ''}/empty`,
      output: [`${o.name ?? ''}/empty`],
      attribute: [{ name: 'value', type: TENSOR_ATTRIBUTE, t: { dataType: o.type?.tensorType?.elemType ?? 1, dims: (o.type?.tensorType?.shape?.dim ?? [{}]).map(() => 0) } }],
    })),
    output: outputs.map((o) => ({ ...o, name: `${o.name ?? ''}/empty` })),
  };
  const scalar = (name: string, value: number): OnnxNode => ({
    opType: 'Constant',
    name,
    output: [name],
    attribute: [{ name: 'value', type: TENSOR_ATTRIBUTE, t: { dataType: INT64, dims: [], int64Data: [value] } }],
  });
  const [index, zero, count, has] = [`m${i}/rows_index`, `m${i}/zero`, `m${i}/rows`, `m${i}/has_rows`];
  return {
    nodes: [
      scalar(index, i),
      scalar(zero, 0),
      { opType: 'Gather', name: count, input: [MEMBER_ROWS, index], output: [count], attribute: [intAttribute('axis', 0)] },
      { opType: 'Greater', name: has, input: [count, zero], output: [has] },
      {
        opType: 'If',
        name: `m${i}/if_rows`,
        input: [has],
        output: outputs.map((o) => o.name ?? ''),
        attribute: [
          { name: 'then_branch', type: GRAPH_ATTRIBUTE, g: run },
          { name: 'else_branch', type: GRAPH_ATTRIBUTE, g: empty },
        ],
      },
    ],
    outputs,
    names: (graph.output ?? []).map((v) => v.name ?? ''),
  };
}

/** Writes the merged graph to `dir` and loads it as one session. */
export async function loadMergedPrefixBatch(runtime: ModelRuntime, name: string, merged: MergedPrefixBatch, dir: string): Promise<PrefixBatchedModel> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, 'prefix-batch.onnx');
  await writeFile(file, encodeOnnxModel(merged.model));
  const loaded = await runtime.load({ name, file });
  const inputNames = loaded.inputNames.filter((n) => n !== MEMBER_ROWS);
  return {
    name,
    inputNames,
    outputNames: merged.outputs,
    async run(perMember) {
      if (perMember.length !== merged.outputs.length) {
        throw new RangeError(`${name}: run takes one set of feeds per member (${merged.outputs.length}), got ${perMember.length}`);
      }
      const rows = perMember.map((feeds, member) => rowsOf(feeds, inputNames, `${name} member ${member}`));
      const given = perMember.filter((_, member) => rows[member]! > 0);
      if (given.length === 0) return perMember.map(() => ({}));
      const feeds: NamedTensors = Object.fromEntries(inputNames.map((input) => [input, concatRows(given.map((f) => f[input]!))]));
      feeds[MEMBER_ROWS] = { type: 'int64', dims: [rows.length], data: BigInt64Array.from(rows.map(BigInt)) };
      const outputs = await loaded.run(feeds);
      return merged.outputs.map((names, member) => (rows[member] === 0 ? {} : Object.fromEntries(names.map((n) => [n, outputs[memberName(n, member)]!]))));
    },
    dispose: () => loaded.dispose(),
  };
}
