export * from './errors.js';
export type * from './bus/index.js';
export type { Frame } from './contracts/frame.js';
