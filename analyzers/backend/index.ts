export { createBackend, type BackendOptions, type BackendStatus } from './backend.js';
export { chooseBatch, type BatchChoice, type BatchingPolicy, type DropPolicy } from './session-queue.js';
export { catchUpMs, completionTimePlan, edfBatch, nextStep, tardyPlan, type ActiveRequest, type OnTimePlan, type Segment, type StagedLatency, type UnitGranularity } from './ontime.js';
export { createLocalAnalysis, EWMA_WEIGHT, type LocalAnalysis, type LocalAnalysisOptions, type LocalAnalysisStatus } from './local-analysis.js';
