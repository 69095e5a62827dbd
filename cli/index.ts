/** The composition roots, for benchmarks and tests; `main.ts` is the `panoptes` command. */
export { runEmbedded, type EmbeddedOptions, type RunSummary } from './embedded.js';
export { formatTable, type OutputFormat } from './output.js';
