export type * from './types.js';
export { loadModelRunner, type ModelRunner } from './zoo.js';
export { cropImage } from './ocr/index.js';
