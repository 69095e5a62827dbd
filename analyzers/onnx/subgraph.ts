import { ErrorCode, PanoptesError } from '../../core/index.js';
import { feedInputs, graphOf, nodeReads, type OnnxModel, type OnnxValueInfo } from './onnx-model.js';

export interface SubgraphBounds {
  /** Tensors the subgraph takes as inputs instead of computing them. */
  readonly inputs: readonly string[];
  /** Tensors the subgraph outputs. */
  readonly outputs: readonly string[];
}

/**
 * The part of a model that computes `outputs` from `inputs`: the nodes met walking back from the
 * outputs until an input, an initializer or a graph input of the model (which stays an input).
 * Inputs that nothing reads are dropped. The model keeps its opsets, functions and metadata.
 * Every input and output needs a known type (a graph input, output or `value_info` entry); models
 * without `value_info` need ONNX shape inference first.
 */
export function extractSubgraph(model: OnnxModel, bounds: SubgraphBounds): OnnxModel {
  const graph = graphOf(model);
  const nodes = graph.node ?? [];
  const producers = new Map(nodes.flatMap((node, index) => (node.output ?? []).map((name) => [name, index] as const)));
  const initializers = new Set((graph.initializer ?? []).map((t) => t.name ?? ''));
  const modelInputs = new Set(feedInputs(graph).map((v) => v.name ?? ''));
  const cutAt = new Set(bounds.inputs);

  const kept = new Set<number>();
  const usedInputs = new Set<string>();
  const usedInitializers = new Set<string>();
  const seen = new Set<string>();
  const pending = [...bounds.outputs];
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (seen.has(name)) continue;
    seen.add(name);
    const producer = producers.get(name);
    if (cutAt.has(name) || modelInputs.has(name)) usedInputs.add(name);
    else if (initializers.has(name)) usedInitializers.add(name);
    else if (producer === undefined) throw new RangeError(`extractSubgraph: no node, initializer or input of the model makes '${name}'`);
    else if (!kept.has(producer)) {
      kept.add(producer);
      pending.push(...nodeReads(nodes[producer] ?? {}));
    }
  }

  const typed = new Map([...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])].map((v) => [v.name ?? '', v]));
  const valueInfo = (name: string): OnnxValueInfo => {
    const info = typed.get(name);
    if (info?.type) return info;
    throw new PanoptesError(ErrorCode.ModelLoad, `the type of tensor '${name}' is unknown: run ONNX shape inference on the model to record it`, {
      details: { tensor: name },
    });
  };
  const inputs = [...new Set([...bounds.inputs, ...modelInputs])].filter((name) => usedInputs.has(name));
  const keptNodes = nodes.filter((_, index) => kept.has(index));
  const boundary = new Set([...inputs, ...bounds.outputs]);
  const written = new Set(keptNodes.flatMap((n) => n.output ?? []));
  return {
    ...model,
    graph: {
      ...graph,
      node: keptNodes,
      initializer: (graph.initializer ?? []).filter((t) => usedInitializers.has(t.name ?? '')),
      // Models from before IR 4 list their initializers among the inputs too.
      input: [...inputs.map(valueInfo), ...(graph.input ?? []).filter((v) => usedInitializers.has(v.name ?? ''))],
      output: bounds.outputs.map(valueInfo),
      valueInfo: (graph.valueInfo ?? []).filter((v) => written.has(v.name ?? '') && !boundary.has(v.name ?? '')),
    },
  };
}

/**
 * Splits a model at `cut` into a prefix that computes the cut tensors from the model's inputs
 * and a suffix that computes the model's outputs from the cut tensors (and from any model input
 * it reads directly). Running one after the other gives what the model gives.
 */
export function splitModel(model: OnnxModel, cut: readonly string[]): { prefix: OnnxModel; suffix: OnnxModel } {
  const graph = graphOf(model);
  const outputs = (graph.output ?? []).map((v) => v.name ?? '');
  return {
    prefix: extractSubgraph(model, { inputs: [], outputs: cut }),
    suffix: extractSubgraph(model, { inputs: cut, outputs }),
  };
}
