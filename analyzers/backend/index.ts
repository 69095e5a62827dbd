export { createBackend, taskTopics, type BackendOptions, type BackendStatus } from './backend.js';
export { chooseBatch, type BatchChoice, type DropPolicy } from './session-queue.js';
