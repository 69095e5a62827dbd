import { ErrorCode, PanoptesError } from '../../core/index.js';
import { earlyDropVsLazy } from './experiment-early-drop.js';
import { efficiencyVsLowerBound } from './experiment-efficiency.js';
import { onTimeCapacities } from './experiment-ontime.js';
import { planningTime } from './experiment-planning.js';
import { variantsVsDropping } from './experiment-variants.js';
import { queryAnalysisVsEven } from './experiment-query-analysis.js';
import { reaction } from './experiment-reaction.js';
import { squishyVsOblivious } from './experiment-squishy.js';
import { wegTable52 } from './experiment-weg.js';

/**
 * The experiments behind `panoptes simulate <experiment|all> --json`: each runs the simulator
 * (or, for planning time, the packer) now and returns its figure; nothing is stored. The figures
 * sit beside the paper's in docs/scheduler.md.
 */
export const EXPERIMENTS = {
  /** Max rate at 99% good, early drop over lazy drop (Poisson, one GPU, §4.3): the largest over α. */
  earlyDropVsLazy: () => round(earlyDropVsLazy().ratio, 3),
  /** Throughput at 99% good on 8 GPUs, squishy over batch-oblivious, Fig. 16 mixes (a)-(e). */
  squishyVsOblivious: () => squishyVsOblivious().mixes.map((m) => round(m.ratio, 3)),
  /** Frame rate at 99% good, query analysis over even split, SSD → Inception at 400 ms, γ = 0.1, 1, 10. */
  queryAnalysisVsEven: () => queryAnalysisVsEven().ratios.map((r) => round(r, 3)),
  /** Σ R/T_max over the GPUs the plan uses, the paper's seven apps: SLOs split jointly, each app alone, and the best any split allows. */
  efficiencyVsLowerBound: () => {
    const f = efficiencyVsLowerBound();
    return { efficiency: round(f.efficiency, 3), perAppSplits: round(f.lowerBoundGpus / f.perAppGpus, 3), anySplitAtMost: round(f.lowerBoundGpus / Math.ceil(f.splitFloorGpus - 1e-9), 3), badRate: round(f.badRate, 4) };
  },
  /** Seconds to the first plan with more / fewer GPUs after the load doubles / falls back, and the run's bad rate. */
  reaction: () => {
    const { detectS, releaseS, badRate } = reaction();
    return { detectS, releaseS, badRate: round(badRate, 4) };
  },
  /** Median time to pack 1,000 sessions (about 100 GPUs), ms. */
  planning1000SessionsMs: () => round(planningTime().medianMs, 1),
  /** WEG on the thesis' Table 5.2 traces and the faces switching every 10/20/30 s: speedup and accuracy beside the thesis'. */
  weg: () =>
    wegTable52().rows.map((r) => ({ task: r.task, trace: r.trace, speedup: round(r.speedup, 2), thesisSpeedup: r.thesis.speedup, accuracy: round(r.accuracy, 1), thesisAccuracy: r.thesis.accuracy, oracleAccuracy: round(r.oracleAccuracy, 1) })),
  /** Edge scheduling Fig. 8: capacity at 90% on time (150 ms) on one GPU, per policy, VGG16- and ResNet50-like profiles in 5 stages; and VGG16 at 175 req/s, on-time share per deadline. */
  ontime: () => {
    const figures = onTimeCapacities();
    return {
      capacity: figures.models.map((m) => ({ model: m.model, ...m.capacity, tardyOverEdf: round(m.tardyOverEdf, 3), tardyOverNexus: round(m.tardyOverNexus, 3), paper: m.paper })),
      vgg16At175ByDeadline: figures.deadlineSweep.map((d) => ({ deadlineMs: d.deadlineMs, ...Object.fromEntries(Object.entries(d.onTime).map(([policy, share]) => [policy, round(share, 3)])) })),
      vgg16ParetoCapacity: figures.paretoCapacity,
    };
  },
  /** MCDNN on 4 GPUs: per load (× what fits at full accuracy), goodput and accuracy over all requests, variants vs dropping. */
  variants: () =>
    variantsVsDropping().loads.map((l) => ({
      load: l.load,
      dropGoodput: round(l.dropGoodput, 0),
      dropAccuracy: round(l.dropAccuracy, 3),
      variantsGoodput: round(l.variantsGoodput, 0),
      variantsAccuracy: round(l.variantsAccuracy, 3),
      downgrades: l.downgrades,
    })),
} as const;

export type ExperimentName = keyof typeof EXPERIMENTS;
export const EXPERIMENT_NAMES = Object.keys(EXPERIMENTS) as ExperimentName[];

/** Runs the named experiments (or `all`) and returns their figures, keyed by experiment, in the order of `EXPERIMENT_NAMES`. */
export function runExperiments(names: readonly string[]): Record<string, unknown> {
  const unknown = names.filter((n) => n !== 'all' && !(n in EXPERIMENTS));
  if (unknown.length > 0) {
    throw new PanoptesError(ErrorCode.SchedulerInput, `unknown experiment ${unknown.map((n) => `"${n}"`).join(', ')}; known: all, ${EXPERIMENT_NAMES.join(', ')}`, {
      details: { experiments: unknown, known: ['all', ...EXPERIMENT_NAMES] },
    });
  }
  const wanted = EXPERIMENT_NAMES.filter((n) => names.includes('all') || names.includes(n));
  return Object.fromEntries(wanted.map((name) => [name, EXPERIMENTS[name]()]));
}


const round = (value: number, digits: number): number => Number(value.toFixed(digits));
