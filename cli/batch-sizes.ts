/**
 * The batch each model's own backend session runs at before (or without) a plan.
 *
 * `backend.batch` when the deployment sets it. Otherwise the batch this machine's profile
 * (`panoptes profile`, in the project's `profiles/` and the deployment's `scheduler.profiles`)
 * says runs the most images per second, among those whose ℓ(b) leaves room in the tightest SLO
 * of the apps that use the model: 2ℓ(b) within the budget, SCHEDULESATURATE's rule (Nexus §6.1).
 * Nexus takes the largest such batch, right on a GPU where throughput grows with the batch; on
 * a CPU it often does not (CenterNet runs fewer images per second at batch 4 than at 1 on a
 * 2-core CPU), so the fastest batch is taken instead. Without a profile for this device and
 * model: `DEFAULT_BATCH`.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { cpuDeviceName } from '../analyzers/index.js';
import { projectRoot, type CompiledConfig } from '../core/index.js';
import { gpuBudgetMs, loadProfiles, profileLookup, type ModelProfile } from '../scheduler/index.js';

export const DEFAULT_BATCH = 4;

export interface BatchChoice {
  batch: number;
  /** Where it came from, for the log: `backend.batch`, the profile's device, or the default. */
  from: string;
}

/** The fastest batch that fits the SLO by the profile; undefined when none fits. */
export function fastestBatch(profile: ModelProfile, sloMs: number): number | undefined {
  let best: { batch: number; perSecond: number } | undefined;
  for (let batch = 1; batch <= profile.maxBatch; batch++) {
    const latency = profile.latency(batch);
    if (2 * latency > gpuBudgetMs(profile, sloMs)) break;
    const perSecond = batch / latency;
    if (!best || perSecond > best.perSecond) best = { batch, perSecond };
  }
  return best?.batch;
}

export function modelBatches(config: CompiledConfig, device = cpuDeviceName()): (model: string) => BatchChoice {
  const fixed = config.deployment.backend.batch;
  if (fixed !== undefined) return () => ({ batch: fixed, from: 'backend.batch' });
  const dirs = [join(projectRoot(), 'profiles')];
  const scheduler = config.deployment.scheduler;
  if (scheduler) dirs.push(resolve(dirname(config.file), scheduler.profiles));
  const profiles = [...new Set(dirs)].filter((dir) => existsSync(dir)).flatMap((dir) => loadProfiles(dir));
  const lookup = profileLookup(profiles.filter((p) => p.device === device), device);
  const sloOf = (model: string): number =>
    Math.min(...Object.values(config.apps).filter((app) => app.nodes.some((n) => n.model === model)).map((app) => app.sloMs));
  return (model) => {
    let profile: ModelProfile;
    try {
      profile = lookup(model);
    } catch {
      return { batch: DEFAULT_BATCH, from: `the default (no profile of ${model} on ${device})` };
    }
    const batch = fastestBatch(profile, sloOf(model));
    return batch === undefined
      ? { batch: 1, from: `the ${device} profile (no batch fits the SLO)` }
      : { batch, from: `the ${device} profile` };
  };
}
