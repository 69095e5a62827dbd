export { createBackend, taskTopics, type BackendOptions, type BackendStatus } from './backend.js';
