export type * from './runtime/index.js';
export {
  createOnnxRuntime,
  decodeOnnxModel,
  encodeOnnxModel,
  extractSubgraph,
  groupBySharedPrefix,
  hashGraph,
  loadPrefixBatched,
  readOnnxModel,
  sharedPrefix,
  splitAtSharedPrefix,
  splitModel,
  writePrefixBatch,
  type CutTensor,
  type GraphHashes,
  type HashedNode,
  type OnnxModel,
  type OnnxRuntimeOptions,
  type PrefixBatch,
  type PrefixBatchedModel,
  type PrefixBatchFiles,
  type PrefixGroup,
  type PrefixGroupOptions,
  type PrefixMember,
  type SharedPrefix,
  type SubgraphBounds,
} from './onnx/index.js';
export { decodeJpeg, encodeJpeg, type RgbImage } from './image/index.js';
export { cpuDeviceName, loadModelRunner, profileModel, type BatchTiming, type Letterbox, type ModelRunner, type ModelTimings, type ProfileOptions } from './models/index.js';
export { chooseBatch, createBackend, taskTopics, type BackendOptions, type BackendStatus, type BatchChoice, type DropPolicy } from './backend/index.js';
