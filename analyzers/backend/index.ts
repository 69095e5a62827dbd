export { createBackend, taskTopics, type BackendOptions, type BackendStatus } from './backend.js';
export { createBatcher, type Batcher } from './batcher.js';
