import { readFile } from 'node:fs/promises';
import onnxProto from 'onnx-proto';
import { ErrorCode, PanoptesError } from '../../core/index.js';

const { onnx } = onnxProto;

/**
 * An ONNX model as its protobuf message. onnx-proto carries the ONNX 1.10 schema (IR 8): fields
 * added since (node and graph `metadata_props`, a node's `overload`) are dropped when decoding.
 */
export type OnnxModel = onnxProto.onnx.IModelProto;
export type OnnxGraph = onnxProto.onnx.IGraphProto;
export type OnnxNode = onnxProto.onnx.INodeProto;
export type OnnxValueInfo = onnxProto.onnx.IValueInfoProto;

export function decodeOnnxModel(bytes: Uint8Array): OnnxModel {
  try {
    return onnx.ModelProto.decode(bytes);
  } catch (err) {
    throw new PanoptesError(ErrorCode.ModelLoad, `not an ONNX model: ${String(err)}`, { cause: err });
  }
}

export function encodeOnnxModel(model: OnnxModel): Uint8Array {
  return onnx.ModelProto.encode(model).finish();
}

export async function readOnnxModel(file: string): Promise<OnnxModel> {
  const bytes = await readFile(file).catch((err: unknown) => {
    throw new PanoptesError(ErrorCode.ModelLoad, `cannot read model file ${file}`, { cause: err, details: { file } });
  });
  try {
    return onnx.ModelProto.decode(bytes);
  } catch (err) {
    throw new PanoptesError(ErrorCode.ModelLoad, `${file} is not an ONNX model`, { cause: err, details: { file } });
  }
}

export function graphOf(model: OnnxModel): OnnxGraph {
  if (!model.graph) throw new PanoptesError(ErrorCode.ModelLoad, 'the ONNX model has no graph');
  if (model.graph.sparseInitializer?.length) {
    throw new PanoptesError(ErrorCode.ModelLoad, 'ONNX graph tools do not handle sparse initializers yet');
  }
  return model.graph;
}

/** The graph inputs fed at run time; old models also list their initializers as inputs. */
export function feedInputs(graph: OnnxGraph): OnnxValueInfo[] {
  const initializers = new Set(graph.initializer?.map((t) => t.name));
  return (graph.input ?? []).filter((v) => !initializers.has(v.name));
}

/** The dims of the model's first fed input: a number where the graph fixes it, undefined where it is symbolic. */
export function firstInputDims(model: OnnxModel): (number | undefined)[] {
  const dims = feedInputs(graphOf(model))[0]?.type?.tensorType?.shape?.dim ?? [];
  return dims.map((d) => (d.dimValue === undefined || d.dimValue === null ? undefined : Number(d.dimValue)));
}

/** The tensors a node reads: its inputs, less the empty names of absent optional ones, and `subgraphReads`. */
export function nodeReads(node: OnnxNode): string[] {
  return [...(node.input ?? []).filter((name) => name !== ''), ...subgraphReads(node)];
}

/** The outer tensors a node's subgraphs (If/Loop/Scan bodies) read by name: wiring too. */
export function subgraphReads(node: OnnxNode): string[] {
  const subgraphs = (node.attribute ?? []).flatMap((a) => [...(a.g ? [a.g] : []), ...(a.graphs ?? [])]);
  return [...new Set(subgraphs.flatMap(outerReads))];
}

function outerReads(graph: OnnxGraph): string[] {
  const defined = new Set([
    ...(graph.input ?? []).map((v) => v.name),
    ...(graph.initializer ?? []).map((t) => t.name),
    ...(graph.node ?? []).flatMap((n) => n.output ?? []),
  ]);
  return (graph.node ?? []).flatMap(nodeReads).filter((name) => !defined.has(name));
}

/** ONNX TensorProto.DataType.FLOAT. */
const FLOAT = 1;

/** A float32 weight as an ONNX initializer. */
export const floatInitializer = (name: string, dims: number[], values: Float32Array) => ({
  name,
  dims,
  dataType: FLOAT,
  rawData: new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength)),
});

/** A model built here: one graph, on the opset its ops are written for. */
export const builtModel = (graph: OnnxGraph): OnnxModel => ({ irVersion: 8, producerName: 'panoptes', opsetImport: [{ domain: '', version: 13 }], graph });

/** ONNX AttributeProto attributes of types INT and INTS. */
export const intAttribute = (name: string, value: number) => ({ name, type: 2, i: value });
export const intsAttribute = (name: string, values: number[]) => ({ name, type: 7, ints: values });

/** A float32 graph input or output; a string dimension is named (`batch`). */
export const floatValueInfo = (name: string, dims: readonly (number | string)[]): OnnxValueInfo => ({
  name,
  type: { tensorType: { elemType: FLOAT, shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } },
});
