export type * from './runtime/index.js';
export type * from './models/types.js';
export { createOnnxRuntime, type OnnxRuntimeOptions } from './onnx/index.js';
export { decodeJpeg, encodeJpeg } from './image/index.js';
export { loadModelRunner, type ModelRunner } from './models/zoo.js';
export { createBackend, taskTopics, type BackendOptions, type BackendStatus } from './backend/index.js';
