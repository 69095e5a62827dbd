import type { ResolvedModel } from '../core/index.js';
import type { ProfileLookup } from './profile.js';
import { squishyBinPacking, type Packing, type PackOptions, type Session } from './squishy.js';
import { peakThroughput } from './worst-case.js';

/**
 * Model variants under a budget, after MCDNN (thesis ch. 4, research/shen-thesis.md §3): when
 * the plan needs more devices than exist, sessions are served by cheaper variants of their model
 * instead of dropping requests. A variant stands in for a model of the zoo (`variantOf`) with
 * its accuracy measured against that model (1 for the model itself).
 *
 * MCDNN picks, per request, the most accurate variant its budget allows; a cluster's budget is
 * its devices, so here the plan downgrades one session one step at a time, choosing the step
 * that loses the least accuracy per device it frees: rate × (a_now − a_next) over
 * rate/T_now − rate/T_next, with T a model's peak throughput at the session's SLO. It re-packs
 * after each step and stops when the plan fits, or when no step frees anything (the rest is then
 * dropped, as without variants). *Our choice:* accuracy is counted per request served, so a
 * busier session's step costs more; each step goes to the next cheaper variant, never skipping.
 */
export interface Variant {
  model: string;
  /** The zoo model it stands in for. */
  variantOf: string;
  /** Its answers' agreement with that model's, 0..1. */
  accuracy: number;
}

export interface Downgrade {
  session: string;
  from: string;
  to: string;
  /** Accuracy lost, per request of the session. */
  accuracyLost: number;
  /** Devices the step freed, at peak throughput. */
  devicesFreed: number;
}

/** The variants a model zoo names (`variantOf`). */
export function zooVariants(models: Readonly<Record<string, ResolvedModel>>): Variant[] {
  return Object.values(models).flatMap((m) => (m.variantOf ? [{ model: m.name, variantOf: m.variantOf.model, accuracy: m.variantOf.accuracy }] : []));
}

export interface VariantPlan {
  /** The sessions as served: a downgraded one keeps its id and names its variant as `model`. */
  sessions: (Session & { variantOf?: string; accuracy: number })[];
  packing: Packing;
  downgrades: Downgrade[];
}

export function downgradeToFit(sessions: readonly Session[], variants: readonly Variant[], devices: number, profileOf: ProfileLookup, options: PackOptions = {}): VariantPlan {
  const memoryMB = options.deviceMemoryMB ?? Infinity;
  /** Each model's ladder: itself, then its variants, most accurate first. */
  const ladderOf = (model: string): { model: string; accuracy: number }[] => [
    { model, accuracy: 1 },
    ...variants.filter((v) => v.variantOf === model).sort((a, b) => b.accuracy - a.accuracy),
  ];
  const devicesFor = (s: Session, model: string): number => {
    const peak = peakThroughput(profileOf(model), s.sloMs, memoryMB);
    return peak ? s.rate / peak.throughput : Infinity;
  };
  const served = sessions.map((s) => ({ session: s, ladder: ladderOf(s.model), step: 0 }));
  const current = () =>
    served.map(({ session, ladder, step }) => {
      const rung = ladder[step]!;
      return step === 0 ? { ...session, accuracy: 1 } : { ...session, model: rung.model, variantOf: session.model, accuracy: rung.accuracy };
    });
  const downgrades: Downgrade[] = [];
  for (;;) {
    const packing = squishyBinPacking(current(), profileOf, options);
    if (packing.nodes.length <= devices) return { sessions: current(), packing, downgrades };
    let best: { entry: (typeof served)[number]; cost: number; freed: number } | undefined;
    for (const entry of served) {
      const [now, next] = [entry.ladder[entry.step]!, entry.ladder[entry.step + 1]];
      if (!next) continue;
      const freed = devicesFor(entry.session, now.model) - devicesFor(entry.session, next.model);
      if (!(freed > 0)) continue;
      const cost = (entry.session.rate * (now.accuracy - next.accuracy)) / freed;
      if (!best || cost < best.cost) best = { entry, cost, freed };
    }
    if (!best) return { sessions: current(), packing, downgrades };
    const { entry, freed } = best;
    const [from, to] = [entry.ladder[entry.step]!, entry.ladder[entry.step + 1]!];
    downgrades.push({ session: entry.session.id, from: from.model, to: to.model, accuracyLost: from.accuracy - to.accuracy, devicesFreed: freed });
    entry.step += 1;
  }
}
