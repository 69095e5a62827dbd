export type * from './runtime/index.js';
export { createOnnxRuntime, type OnnxRuntimeOptions } from './onnx/index.js';
export { decodeJpeg, encodeJpeg, type RgbImage } from './image/index.js';
export { loadModelRunner, type Letterbox, type ModelRunner } from './models/index.js';
export { createBackend, taskTopics, type BackendOptions, type BackendStatus } from './backend/index.js';
