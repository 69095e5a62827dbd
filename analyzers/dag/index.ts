export { cropRegion, passesFilter, shiftBox, shiftOutput } from './edges.js';
export { taskTopics } from './graph.js';
export { createDagRunner } from './runner.js';
export { batchDueMs, budgetUpTo, evenSloSplit, stageDeadlineMs, type AppGraph, type StageBudgets } from './stage-deadlines.js';
export { DeadlineMissed, type DagNode, type DagOutbox, type DagRunner, type DagRunnerOptions, type SnapshotStore } from './types.js';
