import { availableParallelism, cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { ResolvedModel } from '../../core/index.js';
import type { RgbImage } from '../image/index.js';
import type { LoadedModel, ModelRuntime } from '../runtime/index.js';
import { loadModelRunner } from './zoo.js';

/** One batch size's measurement, in the scheduler's profile format (`scheduler/profile.ts`). */
export interface BatchTiming {
  batch: number;
  /** Mean time of the model's run on one batch, ms. */
  latencyMs: number;
  stdMs: number;
  /** Memory the process grew by since before the model loaded, at its peak during this batch size's runs, MB. */
  memoryMB: number;
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
  /** Called after each batch size, for progress. */
  onBatch?: (timing: BatchTiming) => void;
}

interface Marks {
  firstRunStart?: number;
  lastRunEnd?: number;
  runMs: number;
}

/** A runtime whose models note when their runs start and end, so a runner's time splits into pre, run and post. */
function markingRuntime(runtime: ModelRuntime, marks: Marks): ModelRuntime {
  return {
    name: runtime.name,
    close: () => runtime.close(),
    async load(model) {
      const loaded = await runtime.load(model);
      const timed: LoadedModel = {
        name: loaded.name,
        inputNames: loaded.inputNames,
        outputNames: loaded.outputNames,
        async run(feeds) {
          const start = performance.now();
          marks.firstRunStart ??= start;
          const outputs = await loaded.run(feeds);
          marks.lastRunEnd = performance.now();
          marks.runMs += marks.lastRunEnd - start;
          return outputs;
        },
        dispose: () => loaded.dispose(),
      };
      return timed;
    },
  };
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
 * Measures a zoo model the way the backend runs it: its runner (pre-processing, the runtime's
 * run, post-processing) on real images, for each batch size. ℓ(b) is the runtime's run alone;
 * pre- and post-processing are per request, taken at batch 1, since the backend overlaps them
 * with other batches' runs (Nexus §6.2). Memory is the process's growth since before the model
 * loaded: on a CPU device, the weights and the runtime's arena, which grows with the batch.
 */
export async function profileModel(spec: ResolvedModel, runtime: ModelRuntime, images: readonly RgbImage[], options: ProfileOptions): Promise<ModelTimings> {
  if (images.length === 0) throw new RangeError('profileModel: at least one image is needed');
  const memoryBytes = options.memoryBytes ?? (() => process.memoryUsage().rss);
  const baseline = memoryBytes();
  const marks: Marks = { runMs: 0 };
  const runner = await loadModelRunner(spec, markingRuntime(runtime, marks));
  try {
    const params = runner.parseParams({});
    const batches: BatchTiming[] = [];
    const pre: number[] = [];
    const post: number[] = [];
    for (let batch = 1; batch <= options.maxBatch; batch++) {
      const inputs = Array.from({ length: batch }, (_, i) => images[i % images.length]!);
      const latencies: number[] = [];
      let peak = memoryBytes();
      for (let run = 0; run < options.warmup + options.runs; run++) {
        marks.firstRunStart = undefined;
        marks.runMs = 0;
        const start = performance.now();
        await runner.run(inputs, inputs.map(() => params));
        const end = performance.now();
        peak = Math.max(peak, memoryBytes());
        if (run < options.warmup) continue;
        latencies.push(marks.runMs);
        if (batch === 1) {
          pre.push((marks.firstRunStart ?? start) - start);
          post.push(end - (marks.lastRunEnd ?? end));
        }
      }
      const timing = { batch, latencyMs: round(mean(latencies)), stdMs: round(std(latencies)), memoryMB: round(Math.max(0, peak - baseline) / 2 ** 20) };
      batches.push(timing);
      options.onBatch?.(timing);
    }
    return { model: spec.name, batches, preprocessMs: round(mean(pre)), postprocessMs: round(mean(post)) };
  } finally {
    await runner.dispose();
  }
}
