import { ErrorCode, PanoptesError } from '../../core/index.js';
import { seededRandom } from './random.js';

/**
 * Arrival processes. Each draws points of a unit-rate process (mean gap 1) from its own seeded
 * stream and maps them through the rate schedule, t = Λ⁻¹(u) with Λ(t) = ∫ rate. Scaling the
 * load therefore moves the same arrivals closer together instead of drawing new ones (common
 * random numbers): the bad rate changes with the load, not with the luck of the draw, which is
 * what makes bisection over a load scale well behaved.
 */

/** The rate from `fromMs` on, requests/s. */
export interface RateStep {
  fromMs: number;
  rate: number;
}

/** A constant rate, or steps in time order starting at 0 ms (a load step, a diurnal pattern). */
export type RateSchedule = number | readonly RateStep[];

export type ArrivalSpec =
  /** Evenly spaced at 1/rate after a random phase, like the Nexus load generator's fixed gap. */
  | { kind: 'uniform'; rate: RateSchedule }
  /** Exponential gaps. */
  | { kind: 'poisson'; rate: RateSchedule }
  /** Pareto gaps with the given shape (> 1), heavy-tailed bursts. @defaultValue shape 1.5 */
  | { kind: 'pareto'; rate: RateSchedule; shape?: number }
  /** Lomax (Pareto II) gaps, shape > 1: as Pareto, but from 0, so bursts come closer together (numpy's `pareto`). @defaultValue shape 1.25 */
  | { kind: 'lomax'; rate: RateSchedule; shape?: number }
  /** Exactly these arrival times, ms, ascending (replays and hand-checked tests). */
  | { kind: 'trace'; timesMs: readonly number[] };

export type ArrivalKind = ArrivalSpec['kind'];

/** Arrival times in ascending order, then Infinity. */
export type ArrivalStream = () => number;

export function arrivalStream(spec: ArrivalSpec, seed: number): ArrivalStream {
  if (spec.kind === 'trace') {
    let i = 0;
    return () => spec.timesMs[i++] ?? Infinity;
  }
  const random = seededRandom(seed);
  const toTime = inverseCumulativeRate(spec.rate);
  const gap = unitGap(spec, random);
  // A uniform stream starts at a random phase within its first gap, so that equal-rate sessions do not arrive in lockstep.
  let u = spec.kind === 'uniform' ? random() - 1 : 0;
  return () => {
    u += gap();
    return toTime(u);
  };
}

/** Gaps of a unit-rate process (mean 1). */
function unitGap(spec: Exclude<ArrivalSpec, { kind: 'trace' }>, random: () => number): () => number {
  switch (spec.kind) {
    case 'uniform':
      return () => 1;
    case 'poisson':
      return () => -Math.log(1 - random());
    case 'pareto': {
      const shape = spec.shape ?? 1.5;
      if (!(shape > 1)) throw new PanoptesError(ErrorCode.SchedulerInput, `a Pareto shape must be above 1 for a finite mean; got ${shape}`);
      const scale = (shape - 1) / shape; // mean = shape·scale/(shape − 1) = 1
      return () => scale / Math.pow(1 - random(), 1 / shape);
    }
    case 'lomax': {
      const shape = spec.shape ?? 1.25;
      if (!(shape > 1)) throw new PanoptesError(ErrorCode.SchedulerInput, `a Lomax shape must be above 1 for a finite mean; got ${shape}`);
      const scale = shape - 1; // mean = scale/(shape − 1) = 1
      return () => scale * (Math.pow(1 - random(), -1 / shape) - 1);
    }
  }
}

/** u (expected arrivals since 0) → time in ms: the inverse of Λ for a step schedule. */
function inverseCumulativeRate(schedule: RateSchedule): (u: number) => number {
  const steps = typeof schedule === 'number' ? [{ fromMs: 0, rate: schedule }] : schedule;
  if (steps[0]?.fromMs !== 0 || steps.some((s, i) => !(s.rate >= 0) || (i > 0 && s.fromMs <= (steps[i - 1] as RateStep).fromMs))) {
    throw new PanoptesError(ErrorCode.SchedulerInput, 'a rate schedule starts at 0 ms, rises in time and has rates ≥ 0', { details: { steps } });
  }
  // Expected arrivals before each step.
  const before = [0];
  steps.slice(1).forEach((step, i) => {
    const prev = steps[i] as RateStep;
    before.push((before[i] as number) + (prev.rate * (step.fromMs - prev.fromMs)) / 1000);
  });
  return (u) => {
    for (let i = steps.length - 1; i >= 0; i--) {
      const step = steps[i] as RateStep;
      const start = before[i] as number;
      if (u >= start && step.rate > 0) {
        const end = before[i + 1] ?? Infinity;
        if (u < end || i === steps.length - 1) return step.fromMs + ((u - start) / step.rate) * 1000;
      }
    }
    return Infinity;
  };
}
