export { createBackend, type BackendOptions, type BackendStatus } from './backend.js';
export { chooseBatch, type BatchChoice, type DropPolicy } from './session-queue.js';
export { createLocalAnalysis, EWMA_WEIGHT, type LocalAnalysis, type LocalAnalysisOptions, type LocalAnalysisStatus } from './local-analysis.js';
