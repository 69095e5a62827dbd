import { createHash } from 'node:crypto';
import onnxProto from 'onnx-proto';
import { ErrorCode, PanoptesError } from '../../core/index.js';
import { feedInputs, graphOf, subgraphReads, type OnnxModel } from './onnx-model.js';

const { onnx } = onnxProto;
type Tensor = onnxProto.onnx.ITensorProto;
type Attribute = onnxProto.onnx.IAttributeProto;
type ValueType = onnxProto.onnx.ITypeProto;

export interface HashedNode {
  /** Position in the model's `graph.node`. */
  readonly index: number;
  /**
   * Merkle hash of the node and everything upstream of it: operator, domain and opset,
   * attributes, and the hashes of the tensors it reads, in order. Names play no part.
   */
  readonly hash: string;
  /** The tensor names it reads (inputs and what its subgraphs read) and writes. */
  readonly reads: readonly string[];
  readonly writes: readonly string[];
  /** Whether it depends, through any path, on a graph input; if not, its outputs are constants. */
  readonly dependsOnInputs: boolean;
  /** Bytes of the tensors its attributes hold (a Constant's value). */
  readonly attributeBytes: number;
}

export interface GraphHashes {
  /** The nodes, in graph order. */
  readonly nodes: readonly HashedNode[];
  /** The structural hash of every tensor, by name: graph inputs, initializers and node outputs. */
  readonly tensors: ReadonlyMap<string, string>;
  /** The size in bytes of each initializer, by name. */
  readonly initializerBytes: ReadonlyMap<string, number>;
  /** The graph's output names. */
  readonly outputs: readonly string[];
}

/**
 * Hashes every node of a model structurally (Nexus §6.3): two nodes in two models get the same
 * hash exactly when they compute the same function of the same inputs, however their tensors,
 * nodes and weights are named. Initializers are hashed by content; graph inputs by position
 * and type.
 */
export function hashGraph(model: OnnxModel): GraphHashes {
  const graph = graphOf(model);
  const opsets = new Map((model.opsetImport ?? []).map((o) => [canonicalDomain(o.domain), String(o.version)]));
  const tensors = new Map<string, string>();
  const fromInputs = new Set<string>();

  feedInputs(graph).forEach((input, position) => {
    tensors.set(input.name ?? '', digest('input', String(position), typeDigest(input.type)));
    fromInputs.add(input.name ?? '');
  });
  const initializerBytes = new Map<string, number>();
  for (const tensor of graph.initializer ?? []) {
    tensors.set(tensor.name ?? '', tensorDigest(tensor));
    initializerBytes.set(tensor.name ?? '', tensorByteLength(tensor));
  }

  const nodes = (graph.node ?? []).map((node, index): HashedNode => {
    const hashOf = (name: string): string => {
      const hash = tensors.get(name);
      if (hash !== undefined) return hash;
      throw new PanoptesError(
        ErrorCode.ModelLoad,
        `node ${index} (${node.opType} '${node.name}') reads '${name}', which no earlier node, initializer or graph input defines (ONNX lists nodes in topological order)`,
        { details: { node: node.name, tensor: name } },
      );
    };
    const domain = canonicalDomain(node.domain);
    const outerReads = subgraphReads(node);
    const hash = digest(
      'node',
      domain,
      opsets.get(domain) ?? '',
      node.opType ?? '',
      digest(...(node.attribute ?? []).map(attributeDigest).sort()),
      digest(...(node.input ?? []).map((name) => (name === '' ? 'absent' : hashOf(name)))),
      digest(...outerReads.map(hashOf).sort()),
      // Which optional outputs are asked for can change what an operator computes.
      (node.output ?? []).map((name) => (name === '' ? '-' : '+')).join(''),
    );
    const reads = [...(node.input ?? []).filter((name) => name !== ''), ...outerReads];
    const writes = (node.output ?? []).filter((name) => name !== '');
    const dependsOnInputs = reads.some((name) => fromInputs.has(name));
    (node.output ?? []).forEach((name, position) => {
      if (name === '') return;
      tensors.set(name, digest('output', hash, String(position)));
      if (dependsOnInputs) fromInputs.add(name);
    });
    const attributeBytes = (node.attribute ?? [])
      .flatMap((a) => [...(a.t ? [a.t] : []), ...(a.tensors ?? [])])
      .reduce((sum, t) => sum + tensorByteLength(t), 0);
    return { index, hash, reads, writes, dependsOnInputs, attributeBytes };
  });

  return { nodes, tensors, initializerBytes, outputs: (graph.output ?? []).map((v) => v.name ?? '') };
}

/** SHA-256 over length-prefixed parts, so that no two different part lists hash alike. */
export function digest(...parts: (string | Uint8Array)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = typeof part === 'string' ? Buffer.from(part) : part;
    hash.update(`${bytes.length}:`).update(bytes);
  }
  return hash.digest('hex');
}

/** '' and 'ai.onnx' both name the default operator set. */
function canonicalDomain(domain: string | null | undefined): string {
  return domain === 'ai.onnx' ? '' : (domain ?? '');
}

/** Dims, data type and values, whichever field holds them; the name is left out. */
function tensorDigest(tensor: Tensor): string {
  if (tensor.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
    throw new PanoptesError(
      ErrorCode.ModelLoad,
      `tensor '${tensor.name}' keeps its values in an external file, which the ONNX graph tools do not read`,
      { details: { tensor: tensor.name } },
    );
  }
  return digest('tensor', onnx.TensorProto.encode({ ...tensor, name: '', docString: '' }).finish());
}

/**
 * Attribute tensors are hashed like initializers, without their names. Subgraphs are hashed as
 * they are, names included: two bodies that differ only in names then count as different, which
 * loses a share but never makes a false one.
 */
function attributeDigest(attribute: Attribute): string {
  const { t, tensors, ...rest } = attribute;
  const tensorDigests = [...(t ? [t] : []), ...(tensors ?? [])].map(tensorDigest);
  return digest('attribute', onnx.AttributeProto.encode({ ...rest, docString: '' }).finish(), ...tensorDigests);
}

/** Symbolic dimensions ('batch', 'N') are named freely by exporters: only fixed sizes count. */
function typeDigest(type: ValueType | null | undefined): string {
  const tensor = type?.tensorType;
  if (!tensor) return digest('type', onnx.TypeProto.encode(type ?? {}).finish());
  const dims = tensor.shape ? tensor.shape.dim?.map((d) => (d.dimParam ? '?' : String(d.dimValue ?? '?'))) : ['unranked'];
  return digest('tensor-type', String(tensor.elemType), ...(dims ?? []));
}

const { DataType } = onnx.TensorProto;
const ELEMENT_BYTES = new Map<number, number>([
  [DataType.FLOAT, 4],
  [DataType.UINT8, 1],
  [DataType.INT8, 1],
  [DataType.UINT16, 2],
  [DataType.INT16, 2],
  [DataType.INT32, 4],
  [DataType.INT64, 8],
  [DataType.BOOL, 1],
  [DataType.FLOAT16, 2],
  [DataType.DOUBLE, 8],
  [DataType.UINT32, 4],
  [DataType.UINT64, 8],
  [DataType.COMPLEX64, 8],
  [DataType.COMPLEX128, 16],
  [DataType.BFLOAT16, 2],
]);

/** The bytes the tensor's values take in memory. */
function tensorByteLength(tensor: Tensor): number {
  if (tensor.rawData?.length) return tensor.rawData.length;
  if (tensor.dataType === DataType.STRING) return (tensor.stringData ?? []).reduce((sum, s) => sum + s.length, 0);
  const count = (tensor.dims ?? []).reduce<number>((n, d) => n * Number(d), 1);
  return count * (ELEMENT_BYTES.get(tensor.dataType ?? DataType.UNDEFINED) ?? 0);
}
