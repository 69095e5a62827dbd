import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { configError, ErrorCode, loadConfigFile, PanoptesError } from '../core/index.js';

/**
 * Batch profiles (Nexus §6.1, "batching profile"): what one model costs on one device at each
 * batch size. The scheduler never looks at the measurements directly; it asks a `ModelProfile`
 * for ℓ(b) (`latency(b)`) and the memory at batch b, interpolated between measured batch sizes.
 */

const batchMeasurementSchema = z.strictObject({
  batch: z.number().int().positive(),
  /** Mean execution time of one batch on the device, ms. */
  latencyMs: z.number().positive(),
  /** Standard deviation of that time, ms. */
  stdMs: z.number().nonnegative(),
  /** Device memory the model uses at this batch (weights and activations), MB. */
  memoryMB: z.number().nonnegative(),
  /** On a CPU device, the CPU time of one batch's run over all the runtime's threads, ms: what the other stages sharing the cores lose. */
  cpuMs: z.number().nonnegative().optional(),
});

export const batchProfileSchema = z.strictObject({
  /** Written by `panoptes profile`; files without it (hand-written, the CLI's input) are version 1. */
  version: z.literal(1).default(1),
  model: z.string().min(1),
  device: z.string().min(1),
  batches: z
    .array(batchMeasurementSchema)
    .min(1)
    .refine((batches) => new Set(batches.map((b) => b.batch)).size === batches.length, 'each batch size measured once'),
  /** CPU pre-processing time of one request, ms. */
  preprocessMs: z.number().nonnegative().optional(),
  /** CPU post-processing time of one request, ms. */
  postprocessMs: z.number().nonnegative().optional(),
});
export type BatchProfile = z.infer<typeof batchProfileSchema>;
export type BatchMeasurement = BatchProfile['batches'][number];

/**
 * The worst-case latency rule the packer and the query analysis share: a batch is taken to run
 * in its mean time plus this many standard deviations (the Nexus code uses mean + std).
 */
export const LATENCY_STD_FACTOR = 1;

/** A profile ready for the scheduler: ℓ(b) and memory for every integer batch 1..maxBatch. */
export interface ModelProfile {
  readonly model: string;
  readonly device: string;
  /** The largest measured batch; larger batches are never planned. */
  readonly maxBatch: number;
  /** CPU time of one request outside the batch (pre- plus post-processing), ms. */
  readonly overheadMs: number;
  /** ℓ(b), ms: mean + LATENCY_STD_FACTOR·std, interpolated. Infinity above maxBatch. */
  latency(batch: number): number;
  /** Device memory at batch b, MB, interpolated. Infinity above maxBatch. */
  memoryMB(batch: number): number;
  /** CPU time of a run at batch b, ms, interpolated; undefined where the profile has none (a GPU's, an older file). */
  cpuMs(batch: number): number | undefined;
}

export type ProfileLookup = (model: string) => ModelProfile;

const worstCase = (m: BatchMeasurement): number => m.latencyMs + LATENCY_STD_FACTOR * m.stdMs;

export function compileProfile(profile: BatchProfile): ModelProfile {
  const measured = [...profile.batches].sort((a, b) => a.batch - b.batch);
  const maxBatch = measured.at(-1)?.batch ?? 0;
  const table = (value: (m: BatchMeasurement) => number): Float64Array => {
    const points = measured.map((m) => ({ batch: m.batch, value: value(m) }));
    const out = new Float64Array(maxBatch + 1);
    for (let b = 1; b <= maxBatch; b++) out[b] = interpolate(points, b);
    return out;
  };
  const latencies = table(worstCase);
  const memories = table((m) => m.memoryMB);
  const cpu = measured.every((m) => m.cpuMs !== undefined) ? table((m) => m.cpuMs!) : undefined;
  const at = (values: Float64Array, batch: number): number => (batch > maxBatch ? Infinity : (values[Math.max(1, batch)] ?? Infinity));
  return {
    model: profile.model,
    device: profile.device,
    maxBatch,
    overheadMs: (profile.preprocessMs ?? 0) + (profile.postprocessMs ?? 0),
    latency: (batch) => at(latencies, batch),
    memoryMB: (batch) => at(memories, batch),
    cpuMs: (batch) => (cpu ? at(cpu, batch) : undefined),
  };
}

/**
 * Linear between measured batch sizes. Below the smallest measured batch, the line through the
 * two smallest, kept between the bounds the packer's assumptions allow (ℓ(b) non-decreasing:
 * at most the smallest's value; ℓ(b)/b non-increasing: at least its share, value·b/batch); with
 * one measured batch, that batch's value. A profile measured from batch 4 up no longer makes a
 * batch of 1 cost as much as a batch of 4.
 */
function interpolate(points: readonly { batch: number; value: number }[], batch: number): number {
  let lower = points[0];
  if (!lower) return Infinity;
  if (batch <= lower.batch) {
    const next = points[1];
    if (batch === lower.batch || !next) return lower.value;
    const line = lower.value - ((lower.batch - batch) * (next.value - lower.value)) / (next.batch - lower.batch);
    return Math.min(lower.value, Math.max((lower.value * batch) / lower.batch, line));
  }
  for (const upper of points) {
    if (upper.batch >= batch) {
      const t = (batch - lower.batch) / (upper.batch - lower.batch);
      return lower.value + t * (upper.value - lower.value);
    }
    lower = upper;
  }
  return Infinity;
}

/**
 * What breaks the packer's assumptions (ℓ(b) non-decreasing, ℓ(b)/b non-increasing; Nexus
 * §6.1 with its erratum): one line per pair of neighbouring measured batch sizes that breaks one.
 * The plan stays valid (every constraint is checked on the values), it is only less good.
 */
export function profileWarnings(profile: BatchProfile): string[] {
  const measured = [...profile.batches].sort((a, b) => a.batch - b.batch);
  const name = `${profile.model} on ${profile.device}`;
  const warnings: string[] = [];
  measured.slice(1).forEach((next, i) => {
    const prev = measured[i] as BatchMeasurement;
    const [lp, ln] = [worstCase(prev), worstCase(next)];
    if (ln < lp) {
      warnings.push(`${name}: latency decreases from ${ms(lp)} at batch ${prev.batch} to ${ms(ln)} at batch ${next.batch}`);
    }
    if (ln / next.batch > lp / prev.batch) {
      warnings.push(
        `${name}: latency per request rises from ${ms(lp / prev.batch)} at batch ${prev.batch} to ${ms(ln / next.batch)} at batch ${next.batch}`,
      );
    }
  });
  return warnings;
}

const ms = (value: number): string => `${Number(value.toFixed(3))} ms`;

/** Reads and validates one profile file; a bad file is PANOPTES_CONFIG_INVALID naming the file and field. */
export function loadProfileFile(file: string): BatchProfile {
  return loadConfigFile(batchProfileSchema, file);
}

/** Every `*.json` file in `dir`, one profile per (device, model). Their warnings: {@link warningsFor}. */
export function loadProfiles(dir: string): BatchProfile[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json')).sort();
  } catch (err) {
    throw new PanoptesError(ErrorCode.ProfileNotFound, `cannot read the profiles directory ${dir}`, { cause: err, details: { dir } });
  }
  const fileOf = new Map<string, string>();
  const profiles = names.map((name) => {
    const file = join(dir, name);
    const profile = loadProfileFile(file);
    const key = `${profile.device}\u0000${profile.model}`;
    const first = fileOf.get(key);
    if (first) {
      throw configError(file, [
        { file, path: 'model', message: `a second profile for model "${profile.model}" on device "${profile.device}"; the first is ${first}` },
      ]);
    }
    fileOf.set(key, file);
    return profile;
  });
  return profiles;
}

/** The warnings of the profiles of `models` (on `device`, where given): a directory holds profiles of models a deployment does not run. */
export function warningsFor(profiles: readonly BatchProfile[], models: Iterable<string>, device?: string): string[] {
  const used = new Set(models);
  return profiles.filter((p) => used.has(p.model) && (device === undefined || p.device === device)).flatMap(profileWarnings);
}

/**
 * The profiles of one device, by model. Without `device` the profiles must all be of one device.
 * A model without a profile is PANOPTES_PROFILE_NOT_FOUND naming the model and the device.
 */
export function profileLookup(profiles: readonly BatchProfile[], device?: string): ProfileLookup {
  const devices = [...new Set(profiles.map((p) => p.device))];
  if (device === undefined && devices.length > 1) {
    throw new PanoptesError(ErrorCode.SchedulerInput, `profiles for several devices (${devices.join(', ')}); name the device to plan for`, {
      details: { devices },
    });
  }
  const target = device ?? devices[0] ?? '(no profiles)';
  const compiled = new Map(profiles.filter((p) => p.device === target).map((p) => [p.model, compileProfile(p)]));
  return (model) => {
    const profile = compiled.get(model);
    if (!profile) {
      throw new PanoptesError(
        ErrorCode.ProfileNotFound,
        `no batch profile for model "${model}" on device "${target}"; run \`panoptes profile ${model}\` on that device`,
        { details: { model, device: target } },
      );
    }
    return profile;
  };
}

/**
 * A profile from the paper's linear model ℓ(b) = α·b + β (Eq. 1), measured at every batch
 * 1..maxBatch; memory grows the same way. For tests and the simulator.
 */
export function linearProfile(options: {
  model: string;
  device?: string;
  alphaMs: number;
  betaMs: number;
  maxBatch: number;
  stdMs?: number;
  /** Memory at batch b = baseMB + perItemMB·b. */
  memory?: { baseMB: number; perItemMB: number };
}): BatchProfile {
  const { alphaMs, betaMs, memory = { baseMB: 0, perItemMB: 0 } } = options;
  return {
    version: 1,
    model: options.model,
    device: options.device ?? 'simulated',
    batches: Array.from({ length: options.maxBatch }, (_, i) => ({
      batch: i + 1,
      latencyMs: alphaMs * (i + 1) + betaMs,
      stdMs: options.stdMs ?? 0,
      memoryMB: memory.baseMB + memory.perItemMB * (i + 1),
    })),
  };
}
