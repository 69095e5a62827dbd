// `npm run bench -- cache-misses [--requests N]`: what a miss costs against the base model whole,
// which GATI bounds by a small epsilon. EfficientNet-Lite2 at 260 px is cut at 4 block outputs,
// as in `npm run bench -- cache`, with caches whose lookups never hit (an instant answer in
// JavaScript: what is left is the base's own cost of stopping at cuts). One request at a time,
// the variants taking turns: the whole model; a cache at one layer, synchronous and asynchronous
// lookups (the base stops at that layer only); caches at all four layers (it stops at every cut).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  blockOutputs,
  createCachedModel,
  createOnnxRuntime,
  loadSegmentedModel,
  LOOKUP_HIT,
  LOOKUP_PROBABILITIES,
  readOnnxModel,
  type LoadedModel,
  type NamedTensors,
} from '../analyzers/index.js';
import { createLogger, loadModelZoo } from '../core/index.js';

const BASE = 'efficientnet-lite2';
const CUTS = 4;

/** A lookup that answers at once and never hits. */
const neverHits: LoadedModel = {
  name: 'never-hits',
  inputNames: [],
  outputNames: [LOOKUP_PROBABILITIES, LOOKUP_HIT],
  async run(feeds) {
    const rows = Object.values(feeds)[0]!.dims[0]!;
    return {
      [LOOKUP_PROBABILITIES]: { type: 'float32', data: new Float32Array(rows * 2), dims: [rows, 2] },
      [LOOKUP_HIT]: { type: 'float32', data: new Float32Array(rows), dims: [rows, 1] },
    };
  },
  dispose: async () => undefined,
};

export async function cacheMissesBench(args: readonly string[]): Promise<void> {
  const at = args.indexOf('--requests');
  const requests = at >= 0 ? Number(args[at + 1]) : 150;
  if (!(requests >= 10)) throw new Error(`--requests: expected at least 10, got ${args[at + 1]}`);
  const logger = createLogger({ level: 'warn' });
  const spec = loadModelZoo()[BASE]!;
  const size = spec.inputSize!;
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-bench-cache-misses-'));
  const runtime = createOnnxRuntime({ logger, workers: 1, intraOpThreads: 1 });
  try {
    const all = blockOutputs(await readOnnxModel(spec.file));
    const layers = Array.from({ length: CUTS }, (_, i) => all[Math.floor(((i + 1) * all.length) / (CUTS + 1))]!);
    const base = await loadSegmentedModel(runtime, { name: BASE, file: spec.file }, layers, dir);
    const whole = await runtime.load({ name: `${BASE}-whole`, file: spec.file });
    const feeds = (): NamedTensors => ({ [whole.inputNames[0]!]: { type: 'float32', data: new Float32Array(size * size * 3).fill(128), dims: [1, size, size, 3] } });
    /** A request through the base with never-hitting caches at `cached`. */
    const cachedAt = (cached: number[], mode: 'sync' | 'async'): (() => Promise<unknown>) => {
      const model = createCachedModel({ base, mode, answerOf: () => 0, caches: cached.map((layer) => ({ layer, variant: 'never-hits', model: neverHits, baseClassOf: [0, -1] })) });
      return () => model.run(feeds());
    };
    const variants: Record<string, () => Promise<unknown>> = {
      whole: () => whole.run(feeds()),
      oneLayerSync: cachedAt([1], 'sync'),
      oneLayerAsync: cachedAt([1], 'async'),
      everyCutSync: cachedAt([0, 1, 2, 3], 'sync'),
      everyCutAsync: cachedAt([0, 1, 2, 3], 'async'),
    };
    // The merged segments loaded, and a round of each first: every session has run once.
    await Promise.all([base.prepareRange(0, 1), base.prepareRange(2, CUTS)]);
    for (const run of Object.values(variants)) await run();
    const times: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
    for (let r = 0; r < requests; r++) {
      for (const [name, run] of Object.entries(variants)) {
        const started = performance.now();
        await run();
        times[name]!.push(performance.now() - started);
      }
    }
    const mean = (t: number[]): number => t.reduce((a, b) => a + b, 0) / t.length;
    const p99 = (t: number[]): number => [...t].sort((a, b) => a - b)[Math.min(t.length - 1, Math.floor(0.99 * t.length))]!;
    const figures = Object.fromEntries(
      Object.entries(times).map(([name, t]) => [name, { meanMs: round(mean(t)), p99Ms: round(p99(t)), meanRatio: round(mean(t) / mean(times.whole!), 3), p99Ratio: round(p99(t) / p99(times.whole!), 3) }]),
    );
    for (const [name, f] of Object.entries(figures)) console.log(`${name}: mean ${f.meanMs} ms (${f.meanRatio} of whole), p99 ${f.p99Ms} ms (${f.p99Ratio})`);
    console.log(JSON.stringify({ model: BASE, cuts: layers, requests, ...figures }));
    await base.dispose();
    await whole.dispose();
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (n: number, digits = 2): number => Number(n.toFixed(digits));
