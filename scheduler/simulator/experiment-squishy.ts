import { batchObliviousAllocation } from '../baselines.js';
import type { GpuNode, Session } from '../squishy.js';
import { maxGoodLoad } from './max-good-load.js';
import { paperProfiles, type PaperModel } from './paper-profiles.js';
import { arriving, peakLoad, scaled, simulatePlan, squishyOnCluster, zipf } from './workload.js';

/**
 * Squishy bin packing vs the batch-oblivious scheduler, Nexus §7.5 (Fig. 16): 16 sessions on
 * 8 GPUs, Nexus's runtime (early drop) under both. The figure, per mix, is the highest load
 * scale at which 99% of requests are good on the 8 GPUs, squishy over batch-oblivious: the ratio
 * of throughputs at 99% good on a fixed cluster.
 *
 * The batch-oblivious allocation always shares out the 8 GPUs. Squishy packing plans for the
 * load while its plan fits on them, and beyond that routes the load over the plan for the
 * largest load that fits (`squishyOnCluster`), leaving the runtime to absorb what it can.
 *
 * *Silent in the paper:* the rates and SLOs inside each mix. Here (a), (b): SLOs 50, 60, …,
 * 200 ms at equal rates; (c), (d): Zipf-0.9 rates at SLO 100 ms; (e): 8 models × {50, 100} ms
 * at equal rates. Uniform arrivals (the paper's default). Each mix's rates are scaled so that
 * Σ R/T = 8 GPUs at scale 1; 20 simulated seconds per scale.
 */
const GPUS = 8;
const DURATION_MS = 20_000;

/** A Fig. 16 mix: its sessions and their rates' proportions. */
interface Mix {
  name: string;
  sessions: readonly Omit<Session, 'rate'>[];
  weights: readonly number[];
}

const FIG16_MIXES: readonly Mix[] = [
  sloMix('(a) inception4, SLOs 50-200 ms', 'inception4'),
  sloMix('(b) resnet50, SLOs 50-200 ms', 'resnet50'),
  zipfMix('(c) inception4, Zipf-0.9 rates', 'inception4'),
  zipfMix('(d) resnet50, Zipf-0.9 rates', 'resnet50'),
  modelMix('(e) 8 models × SLOs 50, 100 ms', ['lenet5', 'vgg7', 'googlenet-car', 'resnet50', 'inception4', 'vgg-face', 'fig3-x', 'fig3-y']),
];

function sloMix(name: string, model: PaperModel): Mix {
  const sessions = Array.from({ length: 16 }, (_, i) => ({ id: `${model}-${50 + 10 * i}ms`, model, sloMs: 50 + 10 * i }));
  return { name, sessions, weights: sessions.map(() => 1) };
}

function zipfMix(name: string, model: PaperModel): Mix {
  const sessions = Array.from({ length: 16 }, (_, i) => ({ id: `${model}-${i + 1}`, model, sloMs: 100 }));
  return { name, sessions, weights: zipf(16, 0.9) };
}

function modelMix(name: string, models: readonly PaperModel[]): Mix {
  const sessions = models.flatMap((model) => [50, 100].map((sloMs) => ({ id: `${model}-${sloMs}ms`, model, sloMs })));
  return { name, sessions, weights: sessions.map(() => 1) };
}

export interface SquishyFigures {
  mixes: { name: string; squishyScale: number; obliviousScale: number; ratio: number }[];
}

export function squishyVsOblivious(seed = 1): SquishyFigures {
  return {
    mixes: FIG16_MIXES.map((mix) => {
      const sessions = atEightGpus(mix);
      const squishyScale = maxScale(sessions, squishyOnCluster((scale) => scaled(sessions, scale), GPUS, paperProfiles), seed);
      const oblivious = (scale: number): GpuNode[] => batchObliviousAllocation(scaled(sessions, scale), paperProfiles, { gpus: GPUS }).nodes;
      const obliviousScale = maxScale(sessions, oblivious, seed);
      return { name: mix.name, squishyScale, obliviousScale, ratio: squishyScale / obliviousScale };
    }),
  };
}

/** The mix's sessions with rates in proportion to its weights, scaled so that Σ R/T = 8 GPUs. */
function atEightGpus(mix: Mix): Session[] {
  const sessions = mix.sessions.map((s, i) => ({ ...s, rate: mix.weights[i] ?? 0 }));
  return scaled(sessions, GPUS / peakLoad(sessions, paperProfiles));
}

/** The highest load scale at which the plans `plan` makes keep 99% of requests good. */
function maxScale(sessions: readonly Session[], plan: (scale: number) => GpuNode[], seed: number): number {
  return maxGoodLoad(
    (scale) => simulatePlan(arriving(scaled(sessions, scale), 'uniform'), plan(scale), paperProfiles, { durationMs: DURATION_MS, seed }),
    { highScale: 1 },
  );
}
