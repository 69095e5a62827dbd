import type { ProfileLookup } from './profile.js';
import { analyzeQuery, FRAMES, queryGpus, type QueryAnalysisOptions, type QuerySpec, type QuerySplit } from './query-analysis.js';
import { sessionId, squishyBinPacking, type PackOptions, type Session } from './squishy.js';

/**
 * Query analysis across apps (ours: Nexus §6.2 splits each app alone). An app's DP prices a stage
 * at its fraction of a GPU, R/T(L), and cannot see two things that decide how many whole GPUs the
 * packer needs:
 * - apps that give one model different budgets make separate sessions, whose residual loads each
 *   take most of a GPU's duty cycle and cannot share one;
 * - a cheap stage left one ε needs a duty cycle so short that little else fits beside it.
 * Starting from each app's own split, a local search tries moves: a shared model aligned at one
 * of its budgets in every app that can give it that budget, and, app by app, its split with a
 * shared model pinned to another app's budget for it and with a floor under every stage's budget.
 * A move is kept when the packed plan needs fewer GPUs, or as many with its load gathered on
 * fewer of them. Every candidate is the DP's best split under its constraint, so every path still
 * fits the app's SLO.
 */

export interface AppQuery {
  query: QuerySpec;
  framesRate: number;
  /** The app's own split (its DP, or the even split it fell back to). */
  split: QuerySplit;
  /** Whether the search may change the split: not for an app whose DP failed, nor one whose DP is costly (fan-in). */
  adjustable: boolean;
  /** The budgets the last plan gave the app's nodes, ms: kept while the search saves no GPU on them (plans do not flip on noise). */
  previous?: Readonly<Record<string, number>>;
}

export type JointSplitOptions = QueryAnalysisOptions & PackOptions;

/** Rounds over the moves; each round tries every move once. */
const MAX_ROUNDS = 10;
/**
 * Sessions packed over the whole descent, at most: planning stays within about a second on a
 * large deployment (the paper's seven apps take about 11,000, some 400 ms).
 */
const MAX_WORK = 25_000;
/** Floors under every stage's budget, as shares of the SLO per stage. */
const FLOOR_SHARES = [0.25, 0.5, 0.75];

/** Requests for one model under one SLO, from any app, form one session (as `planEpoch` makes them). */
export function sessionsOf(apps: readonly { query: QuerySpec; split: QuerySplit }[]): Session[] {
  const sessions = new Map<string, Session>();
  for (const { query, split } of apps) {
    for (const node of query.nodes) {
      const sloMs = split.sloMs[node.id] ?? query.sloMs;
      const id = sessionId(node.model, sloMs);
      const session = sessions.get(id) ?? { id, model: node.model, sloMs: Math.round(sloMs), rate: 0 };
      session.rate += split.rates[node.id] ?? 0;
      sessions.set(id, session);
    }
  }
  return [...sessions.values()].filter((s) => s.rate > 0);
}

/**
 * The splits with fewest GPUs found, `apps[i]`'s at index i. The search starts from the last
 * plan's splits where they still fit and need no more GPUs than the apps' own, else from the
 * apps' own, and its result is taken only where it saves a GPU on its start: a plan changes for a
 * GPU saved, not for noise in the rates.
 */
export function jointSplit(apps: readonly AppQuery[], profileOf: ProfileLookup, options: JointSplitOptions): QuerySplit[] {
  let work = 0;
  const score = (splits: readonly QuerySplit[]): Score => {
    const sessions = sessionsOf(apps.map((a, i) => ({ query: a.query, split: splits[i]! })));
    work += sessions.length;
    const packing = squishyBinPacking(sessions, profileOf, options);
    const occupancy = packing.nodes.map((node) => node.sessions.reduce((busy, s) => busy + profileOf(s.model).latency(s.batch), 0) / node.dutyCycleMs);
    return { gpus: packing.nodes.length + UNSCHEDULABLE_GPUS * packing.unschedulable.length, packed: occupancy.reduce((sum, o) => sum + o * o, 0) };
  };
  const own = apps.map((a) => a.split);
  const kept = apps.map((a) => (a.adjustable && a.previous && stillFits(a, a.previous, profileOf, options) ? { ...a.split, sloMs: { ...a.previous } } : a.split));
  const ownScore = score(own);
  const keptScore = kept.some((k, i) => k !== own[i]) ? score(kept) : ownScore;
  const [start, startScore] = keptScore.gpus <= ownScore.gpus ? [kept, keptScore] : [own, ownScore];

  const splits = [...start];
  const analyze = memoized(apps, profileOf, options);
  let best = startScore;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    let improved = false;
    for (const move of moves(apps, splits, analyze, options)) {
      if (work > MAX_WORK) break;
      const before = new Map([...move.keys()].map((i) => [i, splits[i]!]));
      for (const [i, split] of move) splits[i] = split;
      const s = score(splits);
      if (better(s, best)) [best, improved] = [s, true];
      else for (const [i, split] of before) splits[i] = split;
    }
    if (!improved || work > MAX_WORK) break;
  }
  return best.gpus < startScore.gpus ? splits : start;
}

/** Whether a split the last plan used still fits the app: the same nodes, a batch within every budget, every path within the SLO. */
function stillFits(app: AppQuery, sloMs: Readonly<Record<string, number>>, profileOf: ProfileLookup, options: JointSplitOptions): boolean {
  const { query } = app;
  if (query.nodes.length !== Object.keys(sloMs).length || query.nodes.some((n) => !(sloMs[n.id]! > 0))) return false;
  const ends = new Map<string, number>();
  const endOf = (node: string): number => {
    let end = ends.get(node);
    if (end === undefined) {
      const parents = query.edges.filter((e) => e.to === node && e.from !== FRAMES).map((e) => e.from);
      end = Math.max(0, ...parents.map(endOf)) + sloMs[node]!;
      ends.set(node, end);
    }
    return end;
  };
  return query.nodes.every((n) => endOf(n.id) <= query.sloMs + 1e-9) && Number.isFinite(queryGpus(query, app.framesRate, sloMs, profileOf, options));
}

type Analyze = (index: number, constraints: Pick<QueryAnalysisOptions, 'bounds' | 'minStageMs'>) => QuerySplit | undefined;

/** The app's DP under constraints, each combination run once over the whole search; undefined where no split meets them. */
function memoized(apps: readonly AppQuery[], profileOf: ProfileLookup, options: JointSplitOptions): Analyze {
  const done = new Map<string, QuerySplit | undefined>();
  return (index, constraints) => {
    const key = `${index}|${JSON.stringify(constraints)}`;
    if (!done.has(key)) {
      try {
        done.set(key, analyzeQuery(apps[index]!.query, apps[index]!.framesRate, profileOf, { ...options, ...constraints }));
      } catch {
        done.set(key, undefined);
      }
    }
    return done.get(key);
  };
}

/** Moves, each new splits for some apps: every shared model aligned at each budget some app gives it, then each app's own candidates. */
function* moves(apps: readonly AppQuery[], splits: readonly QuerySplit[], analyze: Analyze, options: JointSplitOptions): Generator<Map<number, QuerySplit>> {
  for (const [model, budgets] of budgetsByModel(apps, splits)) {
    if (budgets.size < 2) continue;
    for (const ms of budgets) {
      const move = new Map<number, QuerySplit>();
      apps.forEach((app, i) => {
        const pinned = app.adjustable && app.query.nodes.some((n) => n.model === model && splits[i]!.sloMs[n.id] !== ms) ? analyze(i, { bounds: pin(app.query, model, ms) }) : undefined;
        if (pinned) move.set(i, pinned);
      });
      if (move.size > 0) yield move;
    }
  }
  for (const [i, app] of apps.entries()) {
    if (!app.adjustable) continue;
    for (const candidate of candidates(apps, i, splits, analyze, options)) yield new Map([[i, candidate]]);
  }
}

/** Fewest GPUs first; among as many, load gathered on fewer of them (Σ occupancy², as in bin-packing local search), one GPU closer to being freed. */
interface Score {
  gpus: number;
  packed: number;
}

/** A session no GPU can serve counts as this many GPUs, so no candidate trades one for a GPU saved. */
const UNSCHEDULABLE_GPUS = 1000;

const better = (a: Score, b: Score): boolean => a.gpus < b.gpus || (a.gpus === b.gpus && a.packed > b.packed + 1e-9);

/** The app's DP under each pin (its model at a budget another app gives it) and each floor, alone and together; infeasible ones left out. */
function* candidates(apps: readonly AppQuery[], index: number, splits: readonly QuerySplit[], analyze: Analyze, options: JointSplitOptions): Generator<QuerySplit> {
  const { query } = apps[index]!;
  const others = budgetsByModel(apps.filter((_, j) => j !== index), splits.filter((_, j) => j !== index));
  const pins: NonNullable<QueryAnalysisOptions['bounds']>[] = [{}];
  for (const model of new Set(query.nodes.map((n) => n.model))) {
    for (const ms of others.get(model) ?? []) pins.push(pin(query, model, ms));
  }
  const perStage = query.sloMs / query.nodes.length;
  const floors = new Set([0, ...FLOOR_SHARES.map((share) => Math.round((share * perStage) / options.epsilonMs) * options.epsilonMs)]);
  for (const bounds of pins) {
    for (const minStageMs of floors) {
      if (Object.keys(bounds).length === 0 && minStageMs === 0) continue;
      const split = analyze(index, { bounds, minStageMs });
      if (split) yield split;
    }
  }
}

/** The budgets each model has in the apps' splits. */
function budgetsByModel(apps: readonly AppQuery[], splits: readonly QuerySplit[]): Map<string, Set<number>> {
  const budgets = new Map<string, Set<number>>();
  apps.forEach((app, i) => {
    for (const node of app.query.nodes) {
      const ms = splits[i]!.sloMs[node.id];
      if (ms !== undefined) budgets.set(node.model, (budgets.get(node.model) ?? new Set()).add(ms));
    }
  });
  return budgets;
}

const pin = (query: QuerySpec, model: string, ms: number): NonNullable<QueryAnalysisOptions['bounds']> =>
  Object.fromEntries(query.nodes.filter((n) => n.model === model).map((n) => [n.id, { minMs: ms, maxMs: ms }]));

