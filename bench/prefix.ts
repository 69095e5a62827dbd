// Prefix batching (Nexus §6.3, Fig. 15): K CenterNet models with different heads on one backbone,
// built by tools/prefix-heads. Each round gives every head a sub-batch of real stills and runs
// them with prefix batching on (the prefix once over the union, then each suffix on its slice)
// and off (each whole model on its own sub-batch, one after the other), in the same run on the
// same cores. Memory is measured in a fresh process per figure (tools/prefix-heads/memory.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createOnnxRuntime, loadPrefixBatched, readOnnxModel, type LoadedModel, type NamedTensors } from '../analyzers/index.js';
import { projectRoot, silentLogger } from '../core/index.js';
import { centernetStills, measureMemory, writeHeads } from '../tools/prefix-heads/index.js';

export interface PrefixBenchOptions {
  /**
   * Numbers of heads (models sharing the backbone) to measure.
   * @defaultValue [1, 2, 4, 8]
   */
  heads?: readonly number[];
  /**
   * Images per head per round: the sub-batch each model runs on its own when prefix batching is off.
   * @defaultValue 2
   */
  subBatch?: number;
  /**
   * Timed rounds per head count, after one untimed.
   * @defaultValue 5
   */
  rounds?: number;
  /** @defaultValue models/centernet.onnx */
  model?: string;
}

export interface PrefixModeFigures {
  /** Images through all heads per second: heads × subBatch × rounds over the time of the runs. */
  imagesPerS: number;
  /** RSS growth from loading the models, MB. */
  loadMB: number;
  /** Highest RSS growth once they ran one round, activations included, MB. */
  peakMB: number;
}

export interface PrefixFigures {
  heads: number;
  subBatch: number;
  on: PrefixModeFigures;
  off: PrefixModeFigures;
}

export async function benchPrefixBatching(options: PrefixBenchOptions = {}): Promise<PrefixFigures[]> {
  const { heads = [1, 2, 4, 8], subBatch = 2, rounds = 5, model = join(projectRoot(), 'models/centernet.onnx') } = options;
  const dir = await mkdtemp(join(tmpdir(), 'panoptes-bench-prefix-'));
  const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1 });
  try {
    // One family, split once; K heads are its first K models and suffixes. Each head's last layer
    // is a separable convolution, two ONNX Convs (depthwise, pointwise): the heads differ in both,
    // so the cut is the one 128-channel feature map both heads read (8 MB an image).
    const written = await writeHeads(await readOnnxModel(model), dir, { heads: Math.max(...heads), layers: 2 });
    const stills = await centernetStills(subBatch);
    const rowShape = stills.dims.slice(1);
    // The runtime takes ownership of what it is fed: every run gets its own copy.
    const subBatchFeeds = (input: string): NamedTensors => ({ [input]: { ...stills, data: stills.data.slice() } });

    const figures: PrefixFigures[] = [];
    for (const k of heads) {
      const split = { prefix: written.split.prefix, members: written.split.members.slice(0, k) };
      const models = written.models.slice(0, k);
      const batched = await loadPrefixBatched(runtime, { name: `heads-${k}`, files: split });
      const whole: LoadedModel[] = [];
      for (const file of models) whole.push(await runtime.load({ name: file, file }));
      const input = batched.inputNames[0] ?? '';
      // Each mode gets its feeds ready, untimed, and returns the runs to time.
      const modes = {
        on: () => {
          const perHead = Array.from({ length: k }, () => subBatchFeeds(input));
          return () => batched.run(perHead);
        },
        off: () => {
          const apart = Array.from({ length: k }, () => subBatchFeeds(input));
          return async () => {
            for (const [i, m] of whole.entries()) await m.run(apart[i]!);
          };
        },
      };
      const seconds = { on: 0, off: 0 };
      for (let round = 0; round <= rounds; round++) {
        // Round 0 warms up; the order alternates so that neither mode always goes first.
        for (const mode of round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
          const runs = modes[mode]();
          const start = performance.now();
          await runs();
          if (round > 0) seconds[mode] += (performance.now() - start) / 1000;
        }
      }
      await Promise.all([batched, ...whole].map((m) => m.dispose()));

      const images = k * subBatch * rounds;
      const onMemory = await measureMemory({ split, rows: subBatch, rowShape });
      const offMemory = await measureMemory({ models, rows: subBatch, rowShape });
      figures.push({
        heads: k,
        subBatch,
        on: { imagesPerS: round1(images / seconds.on), loadMB: round1(onMemory.loadMB), peakMB: round1(onMemory.peakMB) },
        off: { imagesPerS: round1(images / seconds.off), loadMB: round1(offMemory.loadMB), peakMB: round1(offMemory.peakMB) },
      });
    }
    return figures;
  } finally {
    await runtime.close();
    await rm(dir, { recursive: true, force: true });
  }
}

const round1 = (n: number): number => Number(n.toFixed(1));
