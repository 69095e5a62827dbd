/**
 * A deployment's model batches, prefix families and scheduler settings, worked out once at start
 * (a missing profile fails here, not at the first epoch).
 */
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { findPrefixFamilies } from '../analyzers/index.js';
import { scheduledGraph, type CompiledConfig, type Logger, type ResolvedModel } from '../core/index.js';
import { loadProfiles, profileLookup, warningsFor, zooVariants, type EpochServiceOptions } from '../scheduler/index.js';
import { modelBatches } from './batch-sizes.js';

/**
 * Model-runtime worker threads where `backend.threads` is unset: two where there are two cores
 * or more. On this project's 2-core CPU two runs of one core each ran CenterNet alone 20-60%
 * faster than one run on both, and the whole pipeline 15-50% faster, in alternating runs (docs/performance.md):
 * onnxruntime's threads inside one run wait on each other at every operator, and more so on
 * cores shared with other work.
 */
export function defaultModelThreads(cores = availableParallelism()): number {
  return Math.min(2, cores);
}

/**
 * `backend.threads`, else the default; one where a node's learned cache looks up asynchronously:
 * its lookups run on a thread of their own, and pay only on a core the model leaves them.
 */
export function modelThreads(config: CompiledConfig): number {
  const asyncLookups = Object.values(config.apps).some((app) => app.nodes.some((n) => n.cache?.lookups === 'async'));
  return config.deployment.backend.threads ?? (asyncLookups ? 1 : defaultModelThreads());
}

/** The model runtime's threads as a backend of this deployment runs them: the benchmarks' baselines run the same. */
export function modelRuntimeOptions(config: CompiledConfig): { workers: number; spinning: boolean; intraOpThreads?: number } {
  const { spinning, intraOpThreads } = config.deployment.backend;
  return { workers: modelThreads(config), spinning, ...(intraOpThreads ? { intraOpThreads } : {}) };
}

/** Each model's batch before a plan (see batch-sizes.ts), chosen and logged once per model. */
export function ownBatches(config: CompiledConfig, logger: Logger): (model: string) => number {
  const choose = modelBatches(config);
  const chosen = new Map<string, number>();
  return (model) => {
    let batch = chosen.get(model);
    if (batch === undefined) {
      const choice = choose(model);
      logger.info({ model, batch: choice.batch }, `${model} runs in batches of up to ${choice.batch} (from ${choice.from})`);
      chosen.set(model, (batch = choice.batch));
    }
    return batch;
  };
}

/**
 * The apps' models that share a prefix: each family a model the plan may host in its members'
 * place. A model that any node runs with a learned cache stays out: its caches cut its own graph.
 */
export async function prefixFamilies(config: CompiledConfig, logger: Logger): Promise<ResolvedModel[]> {
  const nodes = Object.values(config.apps).flatMap((app) => app.nodes);
  const cached = new Set(nodes.filter((n) => n.cache).map((n) => n.model));
  const used = new Set(nodes.map((n) => n.model).filter((model) => !cached.has(model)));
  const families = await findPrefixFamilies([...used].map((name) => config.models[name]!));
  if (families.length > 0) logger.info({ families: families.map((f) => f.name) }, 'models sharing a prefix: each family merges where the plan finds it pays');
  return families;
}

/** The epoch service's settings, with a profile for every model the apps name (a missing one fails here, not at the first epoch). */
export function schedulerOptions(config: CompiledConfig, families: readonly ResolvedModel[], logger: Logger): Omit<EpochServiceOptions, 'bus'> {
  const settings = config.deployment.scheduler!;
  const profiles = loadProfiles(resolve(dirname(config.file), settings.profiles));
  const profileOf = profileLookup(profiles, settings.device);
  const apps = Object.values(config.apps);
  const graphs = apps.map((a) => ({ app: a.name, sloMs: a.sloMs, ...scheduledGraph(a) }));
  for (const warning of warningsFor(profiles, graphs.flatMap((a) => a.nodes.map((n) => n.model)), settings.device)) logger.warn(warning);
  for (const node of graphs.flatMap((a) => a.nodes)) profileOf(node.model);
  return {
    apps: graphs,
    profileOf,
    families: families.map((f) => ({ name: f.name, models: (f.family ?? []).map((m) => m.name) })),
    epsilonMs: settings.epsilonMs,
    variants: zooVariants(config.models),
    // Unset, the scheduler's own defaults apply: they are defined there only.
    ...(settings.epochS !== undefined ? { epochMs: settings.epochS * 1000 } : {}),
    ...(settings.minEpochS !== undefined ? { minEpochMs: settings.minEpochS * 1000 } : {}),
    ...(settings.deviceMemoryMB ? { deviceMemoryMB: settings.deviceMemoryMB } : {}),
    logger,
  };
}
