/** The composition roots, for benchmarks and tests; `main.ts` is the `panoptes` command. */
export { openBus, waitUntilConsumed } from './adapters.js';
export { parseRoles, runDeployment, ROLES, type Role, type RunOptions, type RunSummary } from './deployment.js';
export { formatTable, type OutputFormat } from './output.js';
export { DEFAULT_BATCH, fastestBatch, modelBatches } from './batch-sizes.js';
export { defaultModelThreads, modelRuntimeOptions, modelThreads } from './run-setup.js';
