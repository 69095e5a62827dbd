/**
 * The batch each model's own backend session runs at before (or without) a plan.
 *
 * `backend.batch` when the deployment sets it. Otherwise the batch this machine's profile
 * (`panoptes profile`, in the project's `profiles/` and the deployment's `scheduler.profiles`)
 * says runs the most images per second, among those whose ℓ(b) leaves room in the tightest SLO
 * of the apps that use the model: 2ℓ(b) within the budget, SCHEDULESATURATE's rule (Nexus §6.1).
 * Nexus takes the largest such batch, right on a GPU where throughput grows with the batch; on
 * a CPU it often does not (CenterNet runs fewer images per second at batch 4 than at 1 on a
 * 2-core CPU), so the fastest batch is taken instead. A CPU profile that has each run's CPU time
 * picks the batch that costs the least CPU per image instead: there the model shares its cores
 * with decoding, pre-processing and the sink, and what a larger batch runs faster alone it can
 * lose to them (CenterNet on 2 cores: no faster alone at batch 2 or 3 than at 1, 5-10% more CPU
 * per image, and the whole pipeline about 5% slower at batch 3 than at 1, measured side by side).
 * Without a profile for this device and model: `DEFAULT_BATCH`.
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

/**
 * By CPU time, a larger batch is taken only when it costs less per image by more than this
 * share: two profiles of one model on a shared machine differ by that much (CenterNet at batch
 * 2: 34.7 and 30.7 ms an image, minutes apart), and a larger batch holds more memory and waits
 * longer.
 */
export const CPU_GAIN_NEEDED = 0.1;

/**
 * The batch that fits the SLO by the profile and runs the most images per unit of what is
 * scarce: CPU time where the profile has it (the smallest batch within CPU_GAIN_NEEDED of the
 * least), else the device's time; undefined when none fits.
 */
export function fastestBatch(profile: ModelProfile, sloMs: number): number | undefined {
  const fitting: number[] = [];
  for (let batch = 1; batch <= profile.maxBatch && 2 * profile.latency(batch) <= gpuBudgetMs(profile, sloMs); batch++) fitting.push(batch);
  const perImage = (cost: (batch: number) => number | undefined) => fitting.map((batch) => ({ batch, cost: cost(batch)! / batch }));
  if (fitting.every((batch) => profile.cpuMs(batch) !== undefined)) {
    const costs = perImage((b) => profile.cpuMs(b));
    const least = Math.min(...costs.map((c) => c.cost));
    return costs.find((c) => c.cost <= least * (1 + CPU_GAIN_NEEDED))?.batch;
  }
  return perImage((b) => profile.latency(b)).reduce<{ batch: number; cost: number } | undefined>((best, c) => (!best || c.cost < best.cost ? c : best), undefined)?.batch;
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
