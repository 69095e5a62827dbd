/**
 * GATI's composition phase (paper §4 and appendix A.1; digest §2.5): which learned caches to
 * enable on a base model cut into segments, at most one variant per candidate layer, under an
 * accuracy filter, a memory budget and the non-overlap constraint (one lookup in flight: a
 * lookup must end before the base model ends the segments up to the next cached layer).
 *
 * The paper relaxes Eq. 10 into an ILP (maximize Σ S_ij with S = α·H + (1 − α)·LG) and solves it
 * with Gurobi for several α, keeping the α whose choice has the lowest expected latency. Here
 * the ILP is solved exactly by a dynamic programme over the chain of cached layers: Eq. 9
 * couples only consecutive cached layers and the score adds up, so the state is the last cached
 * variant, and the memory budget is kept exact by a Pareto frontier of (memory, score) per state.
 */

export interface CacheVariant {
  /** The candidate layer it reads: the output of segment `layer` (0-based). */
  readonly layer: number;
  /** e.g. `Pool(4096)`. */
  readonly name: string;
  /** H: the share of lookups the selector calls hits. */
  readonly hitRate: number;
  /** A: the share of hits whose answer is the base model's (precision against the base). */
  readonly accuracy: number;
  /** The hits A was measured on, and the held-out requests they were among, where known (`vouches`). */
  readonly hits?: number;
  readonly heldOut?: number;
  /** T: predictor + selector, profiled on the machine that serves. */
  readonly lookupMs: number;
  /** M: parameters and working memory. */
  readonly memoryBytes: number;
}

/** Held-out hits from which a precision can be told from another (97% from 80%, say). */
export const MIN_VOUCHED_HITS = 10;

/**
 * Whether a variant's hits are enough to vouch for its precision: MIN_VOUCHED_HITS, or half the
 * held-out requests where those are fewer than twice that (a small exploration online). A
 * precision on fewer (one right hit is 100%) is a guess, and never passes the filter.
 */
const vouches = ({ hits, heldOut }: CacheVariant): boolean => hits === undefined || hits >= Math.min(MIN_VOUCHED_HITS, Math.ceil((heldOut ?? Infinity) / 2));

/** Eq. 11's filter: precise enough, on enough hits to say so. */
const passesFilter = (v: CacheVariant, accuracyTarget: number): boolean => v.accuracy >= accuracyTarget && vouches(v);

export interface CompositionProblem {
  /** L_i: the base model's time for each segment, in order. */
  readonly segmentMs: readonly number[];
  readonly variants: readonly CacheVariant[];
  readonly memoryBudgetBytes: number;
  /** Eq. 11's filter: variants less accurate than this are never enabled. @defaultValue 0.97 */
  readonly accuracyTarget?: number;
  /**
   * What one more run of the base costs (its setup and the hand-offs to the model's thread and
   * back), paid at each cached layer a request reaches: the base stops there and goes on in a run
   * of its own. The paper's Eq. 10 has none. @defaultValue 0
   */
  readonly stopMs?: number;
}

export interface Composition {
  /** The enabled variants, by layer. */
  readonly variants: readonly CacheVariant[];
  /** Eq. 10: the expected time of a request. */
  readonly expectedMs: number;
  /** Eq. 7: the expected share of answers that are the base model's. */
  readonly expectedAccuracy: number;
  /** The α whose ILP chose it, where one did. */
  readonly alpha?: number;
}

export const DEFAULT_ACCURACY_TARGET = 0.97;
/** The α grid of the sweep. */
export const DEFAULT_ALPHAS: readonly number[] = Array.from({ length: 11 }, (_, i) => i / 10);

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);
const byLayer = (variants: readonly CacheVariant[]): CacheVariant[] => [...variants].sort((a, b) => a.layer - b.layer);

/** Σ_{k ≤ i} L_k: the base model's time until layer i's output exists. */
const timeTo = (segmentMs: readonly number[], layer: number): number => sum(segmentMs.slice(0, layer + 1));

/**
 * Eq. 5's effective hit rates, with hits nested (an input that hits at a layer hits at every
 * later one, as the paper's toy example has it): a layer's effective hits are those its hit rate
 * adds to the cached layers before it. Eq. 5 as printed subtracts only the previous layer's
 * effective rate, which counts hits twice from the third cached layer on.
 */
export function effectiveHitRates(variants: readonly CacheVariant[]): number[] {
  let hitBefore = 0;
  return byLayer(variants).map((v) => {
    const hit = Math.max(hitBefore, v.hitRate);
    const effective = hit - hitBefore;
    hitBefore = hit;
    return effective;
  });
}

/**
 * Eq. 10: a hit at layer i costs the segments up to it and its lookup; the rest run the whole
 * model. With `stopMs`, each run of the base costs that much: one run without caches, and a run
 * more for each cached layer a request passes (a hit at the k-th made k runs, a miss one more
 * than there are cached layers).
 */
export function expectedLatency(segmentMs: readonly number[], variants: readonly CacheVariant[], stopMs = 0): number {
  const ordered = byLayer(variants);
  const effective = effectiveHitRates(ordered);
  const hits = sum(effective);
  return sum(ordered.map((v, i) => effective[i]! * (timeTo(segmentMs, v.layer) + (i + 1) * stopMs + v.lookupMs))) + (1 - hits) * (sum(segmentMs) + (ordered.length + 1) * stopMs);
}

/** Eq. 7: hits are right with their variant's precision, the rest are the base model's answer. */
export function expectedAccuracy(variants: readonly CacheVariant[]): number {
  const ordered = byLayer(variants);
  const effective = effectiveHitRates(ordered);
  return sum(ordered.map((v, i) => effective[i]! * v.accuracy)) + (1 - sum(effective));
}

/** Eq. 1: how much faster a hit at this variant is than the whole model. */
export const latencyGain = (segmentMs: readonly number[], v: CacheVariant): number => sum(segmentMs) / (timeTo(segmentMs, v.layer) + v.lookupMs);

/** Eq. 9 for one cached layer: its lookup ends before the base model reaches `nextLayer`'s output (or its own end). */
const lookupFits = (segmentMs: readonly number[], v: CacheVariant, nextLayer: number | undefined): boolean =>
  v.lookupMs <= sum(segmentMs.slice(v.layer + 1, nextLayer === undefined ? undefined : nextLayer + 1));

/** Whether a choice obeys the filter, the budget, one variant per layer and Eq. 9; the reason where not. */
export function violation(problem: CompositionProblem, variants: readonly CacheVariant[]): string | undefined {
  const { segmentMs, memoryBudgetBytes, accuracyTarget = DEFAULT_ACCURACY_TARGET } = problem;
  const ordered = byLayer(variants);
  for (const [i, v] of ordered.entries()) {
    if (v.layer < 0 || v.layer >= segmentMs.length - 1) return `${v.name} reads layer ${v.layer}: caches read the output of segments 0..${segmentMs.length - 2}`;
    if (!passesFilter(v, accuracyTarget)) {
      return v.accuracy < accuracyTarget ? `${v.name} at layer ${v.layer} is ${v.accuracy} accurate, below ${accuracyTarget}` : `${v.name} at layer ${v.layer} had ${v.hits} hits among ${v.heldOut ?? 'its'} held-out requests, too few to vouch for its precision`;
    }
    const next = ordered[i + 1];
    if (next?.layer === v.layer) return `layer ${v.layer} has two variants (${v.name}, ${next.name})`;
    if (!lookupFits(segmentMs, v, next?.layer)) return `${v.name} at layer ${v.layer} takes ${v.lookupMs} ms, longer than the base model takes to the next cached layer`;
  }
  const memory = sum(ordered.map((v) => v.memoryBytes));
  return memory > memoryBudgetBytes ? `the variants need ${memory} bytes, over the budget of ${memoryBudgetBytes}` : undefined;
}

interface Partial {
  readonly memory: number;
  readonly score: number;
  readonly chosen: readonly CacheVariant[];
}

/** The choices no other beats on both memory and score. */
function paretoFront(partials: readonly Partial[]): Partial[] {
  const front: Partial[] = [];
  for (const p of [...partials].sort((a, b) => a.memory - b.memory || b.score - a.score)) {
    if (front.length === 0 || p.score > front[front.length - 1]!.score) front.push(p);
  }
  return front;
}

/**
 * The relaxed ILP (Eqs. 11–14) for one α, solved exactly: the feasible choice with the largest
 * Σ S_ij (ties: the least memory). The empty choice is feasible and scores 0.
 */
export function solveComposition(problem: CompositionProblem, alpha: number): Composition {
  const { segmentMs, memoryBudgetBytes, accuracyTarget = DEFAULT_ACCURACY_TARGET } = problem;
  const candidates = byLayer(problem.variants.filter((v) => passesFilter(v, accuracyTarget) && v.layer >= 0 && v.layer < segmentMs.length - 1 && v.memoryBytes <= memoryBudgetBytes));
  const score = (v: CacheVariant): number => alpha * v.hitRate + (1 - alpha) * latencyGain(segmentMs, v);
  /** Per candidate: the best choices that end with it. */
  const fronts: Partial[][] = [];
  for (const [w, variant] of candidates.entries()) {
    const extended: Partial[] = [{ memory: variant.memoryBytes, score: score(variant), chosen: [variant] }];
    for (let v = 0; v < w; v++) {
      const before = candidates[v]!;
      if (before.layer >= variant.layer || !lookupFits(segmentMs, before, variant.layer)) continue;
      for (const p of fronts[v]!) {
        const memory = p.memory + variant.memoryBytes;
        if (memory <= memoryBudgetBytes) extended.push({ memory, score: p.score + score(variant), chosen: [...p.chosen, variant] });
      }
    }
    fronts.push(paretoFront(extended));
  }
  let best: Partial = { memory: 0, score: 0, chosen: [] };
  for (const [v, front] of fronts.entries()) {
    if (!lookupFits(segmentMs, candidates[v]!, undefined)) continue;
    for (const p of front) if (p.score > best.score || (p.score === best.score && p.memory < best.memory)) best = p;
  }
  return { ...evaluate(problem, best.chosen), alpha };
}

const evaluate = (problem: CompositionProblem, variants: readonly CacheVariant[]): Composition => ({
  variants: byLayer(variants),
  expectedMs: expectedLatency(problem.segmentMs, variants, problem.stopMs),
  expectedAccuracy: expectedAccuracy(variants),
});

/** Every subset of a choice, the choice itself included: each is feasible where the choice is. */
const subsets = <T>(chosen: readonly T[]): T[][] => chosen.reduce<T[][]>((all, v) => [...all, ...all.map((s) => [...s, v])], [[]]);

/** The sweep's choice is the lowest expected latency; among equals, the most accurate. */
const better = (a: Composition, b: Composition): boolean => a.expectedMs < b.expectedMs - 1e-9 || (Math.abs(a.expectedMs - b.expectedMs) <= 1e-9 && a.expectedAccuracy > b.expectedAccuracy);

/**
 * GATI's composition: the ILP for each α of the grid, keeping the choice with the lowest expected
 * latency (Eq. 10). The ILP's score grows with every variant added, so a choice holds every
 * layer that fits; a cached layer whose hits do not pay for its lookups and its stop is left out
 * of it here, by trying each subset of each α's choice (at most 2^layers, a handful).
 */
export function composeCaches(problem: CompositionProblem, alphas: readonly number[] = DEFAULT_ALPHAS): Composition & { sweep: Composition[] } {
  const sweep = alphas.map((alpha) => solveComposition(problem, alpha));
  let best = evaluate(problem, []);
  for (const choice of sweep) {
    for (const subset of subsets(choice.variants)) {
      const candidate = subset.length === choice.variants.length ? choice : evaluate(problem, subset);
      if (better(candidate, best)) best = candidate;
    }
  }
  return { ...best, sweep };
}

/**
 * The paper's baselines: take variants in order of latency gain (or of hit rate), each one that
 * keeps the choice feasible.
 */
export function greedyComposition(problem: CompositionProblem, by: 'latency' | 'hit-rate'): Composition {
  const key = (v: CacheVariant): number => (by === 'latency' ? latencyGain(problem.segmentMs, v) : v.hitRate);
  const chosen: CacheVariant[] = [];
  for (const v of [...problem.variants].sort((a, b) => key(b) - key(a))) {
    if (violation(problem, [...chosen, v]) === undefined) chosen.push(v);
  }
  return evaluate(problem, chosen);
}
