export { createOnnxRuntime, type OnnxRuntimeOptions } from './runtime.js';
export { builtModel, decodeOnnxModel, encodeOnnxModel, firstInputDims, floatInitializer, floatValueInfo, intAttribute, intsAttribute, readOnnxModel, type OnnxModel } from './onnx-model.js';
export { hashGraph, type GraphHashes, type HashedNode } from './graph-hash.js';
export {
  groupBySharedPrefix,
  sharedPrefix,
  type CutTensor,
  type PrefixGroup,
  type PrefixGroupOptions,
  type SharedPrefix,
} from './shared-prefix.js';
export { extractSubgraph, splitModel, type SubgraphBounds } from './subgraph.js';
export {
  loadPrefixBatched,
  splitAtSharedPrefix,
  writePrefixBatch,
  type PrefixBatch,
  type PrefixBatchedModel,
  type PrefixBatchFiles,
  type PrefixMember,
} from './prefix-batch.js';
export { loadMergedPrefixBatch, mergePrefixBatch, MEMBER_ROWS, type MergedPrefixBatch } from './merged-prefix.js';
export { denseHeadModel, encodeDenseHead, HEAD_INPUT, HEAD_OUTPUT } from './dense-head.js';
export { blockOutputs, segmentModel, singleTensorCuts } from './segments.js';
