import { ErrorCode, PanoptesError } from '../../core/index.js';
import { feedInputs, graphOf, nodeReads, type OnnxModel } from './onnx-model.js';
import { extractSubgraph } from './subgraph.js';

/**
 * Cutting a network into segments at hidden layers, for learned caches (GATI §4): execution can
 * stop after any segment, and each segment's output is a hidden output a cache can read.
 */

/**
 * The tensors that alone carry everything the rest of the model needs: after the node that makes
 * one, no other tensor computed so far (or model input) is read again. Such a tensor is a place
 * where the model can be cut into two with one tensor crossing. In model order.
 */
export function singleTensorCuts(model: OnnxModel): { tensor: string; node: number }[] {
  const graph = graphOf(model);
  const nodes = graph.node ?? [];
  const initializers = new Set((graph.initializer ?? []).map((t) => t.name ?? ''));
  const lastRead = new Map<string, number>();
  for (const [i, node] of nodes.entries()) for (const name of nodeReads(node)) if (!initializers.has(name)) lastRead.set(name, i);
  const outputs = new Set((graph.output ?? []).map((v) => v.name ?? ''));
  const live = new Set(feedInputs(graph).map((v) => v.name ?? ''));
  const cuts: { tensor: string; node: number }[] = [];
  for (const [i, node] of nodes.entries()) {
    for (const name of node.output ?? []) if (name !== '') live.add(name);
    for (const name of live) if (!outputs.has(name) && (lastRead.get(name) ?? -1) <= i) live.delete(name);
    const [only] = live;
    if (live.size === 1 && !outputs.has(only!)) cuts.push({ tensor: only!, node: i });
  }
  return cuts;
}

/**
 * Candidate layers where the model has no say: block outputs. A residual block's inner tensors
 * are no cuts at all, its sum (an Add) is; inside a chain of single-tensor cuts (a convolution,
 * its activation, the next convolution…) only the chain's last tensor is a block's output. Only
 * feature maps [batch, C, H, W] larger than 1×1 count: after pooling, the rest of the model is
 * its classifier alone.
 */
export function blockOutputs(model: OnnxModel): string[] {
  const graph = graphOf(model);
  const nodes = graph.node ?? [];
  const shapes = new Map([...(graph.valueInfo ?? []), ...(graph.output ?? [])].map((v) => [v.name ?? '', v.type?.tensorType?.shape?.dim ?? []]));
  const featureMap = (tensor: string): boolean => {
    const dims = shapes.get(tensor) ?? [];
    return dims.length === 4 && !(Number(dims[2]?.dimValue) === 1 && Number(dims[3]?.dimValue) === 1);
  };
  const cuts = singleTensorCuts(model);
  return cuts
    .filter((cut, i) => (nodes[cut.node]?.opType === 'Add' || cuts[i + 1]?.node !== cut.node + 1) && featureMap(cut.tensor))
    .map((cut) => cut.tensor);
}

/**
 * The model cut at `layers` (single-tensor cuts, in model order) into `layers.length + 1`
 * segments: segment 0 reads the model's inputs and outputs `layers[0]`; segment k reads
 * `layers[k − 1]`; the last outputs what the model outputs. Run one after another they give what
 * the model gives.
 */
export function segmentModel(model: OnnxModel, layers: readonly string[]): OnnxModel[] {
  const cuts = singleTensorCuts(model);
  const position = new Map(cuts.map((cut, i) => [cut.tensor, i]));
  for (const [k, layer] of layers.entries()) {
    const at = position.get(layer);
    if (at === undefined) {
      throw new PanoptesError(ErrorCode.ModelLoad, `cannot cut the model at '${layer}': it is not a tensor that alone carries what the rest of the model reads`, {
        details: { tensor: layer },
      });
    }
    if (k > 0 && at <= position.get(layers[k - 1]!)!) throw new PanoptesError(ErrorCode.ModelLoad, `cut '${layer}' comes before '${layers[k - 1]}': list cuts in model order`);
  }
  const outputs = (graphOf(model).output ?? []).map((v) => v.name ?? '');
  return [...layers, undefined].map((layer, k) =>
    extractSubgraph(model, { inputs: k === 0 ? [] : [layers[k - 1]!], outputs: layer === undefined ? outputs : [layer] }),
  );
}
