import { availableParallelism, cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { ResolvedModel } from '../../core/index.js';
import type { RgbImage } from '../image/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { loadModelRunner } from './zoo.js';

/** One batch size's measurement, in the scheduler's profile format (`scheduler/profile.ts`). */
export interface BatchTiming {
  batch: number;
  /** Mean time of the model's run on one batch, ms. */
  latencyMs: number;
  stdMs: number;
  /** Memory the process grew by since before the model loaded, at its peak during this batch size's runs, MB. */
  memoryMB: number;
  /** Mean CPU time of the run over every thread of the process, ms (the runtime's threads; nothing else runs meanwhile). */
  cpuMs: number;
}

export interface ModelTimings {
  model: string;
  batches: BatchTiming[];
  /** Mean pre- and post-processing time of one request, ms (measured at batch 1). */
  preprocessMs: number;
  postprocessMs: number;
}

export interface ProfileOptions {
  /** Batch sizes 1..maxBatch are measured. */
  maxBatch: number;
  /** Timed runs per batch size, after `warmup` untimed ones. */
  runs: number;
  warmup: number;
  /** Process memory now, bytes; `process.memoryUsage().rss` by default. */
  memoryBytes?: () => number;
  /** Called with each batch size's timing once all are measured. */
  onBatch?: (timing: BatchTiming) => void;
}

/**
 * This machine's name in profiles, e.g. `cpu-amd-epyc-2c`: the CPU model and its core count,
 * since onnxruntime spreads a run over every core and the latency follows.
 */
export function cpuDeviceName(): string {
  const model = (cpus()[0]?.model ?? 'unknown').toLowerCase().replace(/\(r\)|\(tm\)|cpu|processor|@.*$/g, '');
  const slug = model.replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
  return `cpu-${slug || 'unknown'}-${availableParallelism()}c`;
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const std = (xs: readonly number[]): number => {
  const m = mean(xs);
  return Math.sqrt(xs.reduce((sum, x) => sum + (x - m) ** 2, 0) / Math.max(1, xs.length - 1));
};
const round = (n: number): number => Math.round(n * 1000) / 1000;

/**
 * Measures a zoo model the way the backend runs it, phase by phase, on real images for each
 * batch size: ℓ(b) is `execute` (the runtime's run) alone; pre- and post-processing (`prepare`,
 * `finish`) are per request, taken at batch 1, since the backend overlaps them with other
 * batches' runs (Nexus §6.3). Memory is the process's growth since before the model loaded:
 * on a CPU device, the weights and the runtime's arena, which grows with the batch.
 *
 * The timed runs go round the batch sizes (1, 2, ..., max, 1, 2, ...), so a change in the
 * machine's load falls on every size alike; measured one size after another, a busy minute made
 * batch 3 look 10% cheaper per image than batch 1 on a CPU where it is not.
 */
export async function profileModel(spec: ResolvedModel, runtime: ModelRuntime, images: readonly RgbImage[], options: ProfileOptions): Promise<ModelTimings> {
  if (images.length === 0) throw new RangeError('profileModel: at least one image is needed');
  const memoryBytes = options.memoryBytes ?? (() => process.memoryUsage().rss);
  const baseline = memoryBytes();
  const runner = await loadModelRunner(spec, runtime);
  try {
    const params = runner.parseParams({});
    const sizes = Array.from({ length: options.maxBatch }, (_, i) => i + 1);
    const timed = (batch: number) => async (): Promise<{ pre: number; run: number; cpu: number; post: number }> => {
      const inputs = Array.from({ length: batch }, (_, i) => images[i % images.length]!);
      const t0 = performance.now();
      const prepared = await runner.prepare(inputs, inputs.map(() => params));
      const t1 = performance.now();
      const cpu = process.cpuUsage();
      const executed = await runner.execute(prepared);
      const t2 = performance.now();
      const { user, system } = process.cpuUsage(cpu);
      await runner.finish(executed);
      return { pre: t1 - t0, run: t2 - t1, cpu: (user + system) / 1000, post: performance.now() - t2 };
    };
    // Warm-up, sizes in increasing order: the runtime's arena grows to each one's need, its memory.
    const memoryMB = new Map<number, number>();
    for (const batch of sizes) {
      let peak = memoryBytes();
      for (let run = 0; run < Math.max(1, options.warmup); run++) {
        await timed(batch)();
        peak = Math.max(peak, memoryBytes());
      }
      memoryMB.set(batch, round(Math.max(0, peak - baseline) / 2 ** 20));
    }
    const latencies = new Map<number, number[]>(sizes.map((b) => [b, []]));
    const cpuTimes = new Map<number, number[]>(sizes.map((b) => [b, []]));
    const pre: number[] = [];
    const post: number[] = [];
    for (let run = 0; run < options.runs; run++) {
      for (const batch of sizes) {
        const t = await timed(batch)();
        latencies.get(batch)!.push(t.run);
        cpuTimes.get(batch)!.push(t.cpu);
        if (batch === 1) {
          pre.push(t.pre);
          post.push(t.post);
        }
      }
    }
    const batches = sizes.map((batch): BatchTiming => {
      const runs = latencies.get(batch)!;
      return { batch, latencyMs: round(mean(runs)), stdMs: round(std(runs)), memoryMB: memoryMB.get(batch)!, cpuMs: round(mean(cpuTimes.get(batch)!)) };
    });
    for (const timing of batches) options.onBatch?.(timing);
    return { model: spec.name, batches, preprocessMs: round(mean(pre)), postprocessMs: round(mean(post)) };
  } finally {
    await runner.dispose();
  }
}
