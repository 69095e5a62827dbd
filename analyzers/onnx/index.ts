export { createOnnxRuntime, type OnnxRuntimeOptions } from './runtime.js';
