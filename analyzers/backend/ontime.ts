/**
 * On-time batching of one model's requests, after "Adaptive Scheduling for Edge-Assisted DNN
 * Serving" (research/edge-scheduling.md §2.2–2.5). The model runs in stages (the paper's layer
 * groups); requests at the same stage can batch there, and a request that started earlier waits
 * at its stage for a later one to catch up.
 *
 * - `completionTimePlan` is the paper's DP (Eq. 1–2, "Our-Time"): the FIFO segmentation with
 *   the least total completion time, bounded batch B. A segment's latest request runs alone
 *   until it reaches the next member's stage, they merge, and so on to the end.
 * - `tardyPlan` is "Our-Tardy": the same segments scored by (tardy requests, completion time);
 *   requests the plan predicts late are dropped and the plan made again until none are.
 * - `edfBatch` is the batching-aware EDF baseline of §2.5(a).
 *
 * A plan's next step: the first segment's shallowest members run one stage (`nextStep`); the
 * caller re-plans when it ends or a request arrives. With one stage (a model run whole, as the
 * backend runs them today) a segment is simply a batch, and Our-Tardy chooses batch sizes.
 *
 * Choices the paper leaves open (marked in the digest): `active(j)` in Eq. 1 is the number of
 * requests not finished before segment j starts, which makes the DP's objective Σ completion
 * exactly; Our-Tardy's segment DP keeps, per prefix, the lexicographically best (tardy, end)
 * (the paper's Lemma 1 no longer holds there, so this is a heuristic, as it says); within a
 * stage, FIFO order is deadline order.
 */

/** h_k(b): the time of stage k (from 0) of a model at batch b, ms. */
export interface StagedLatency {
  stages: number;
  /** The memory bound B: no stage runs a larger batch. */
  maxBatch: number;
  latencyMs(stage: number, batch: number): number;
}

/** A request in flight: the stage it waits before (0: not started; `stages`: done) and its deadline. */
export interface ActiveRequest {
  stage: number;
  deadlineMs: number;
}

/**
 * How requests form the DP's units: `request`, each alone (the paper's O(|R|²) form); `stage`,
 * all requests at one stage together, in chunks of at most B (§2.4's "unit = layer group").
 */
export type UnitGranularity = 'request' | 'stage';

export interface Segment {
  /** Indices into the requests, FIFO order (deepest first). */
  members: number[];
  /** When its members finish, if it runs as planned from now. */
  endMs: number;
}

export interface OnTimePlan {
  /** In the order they run. */
  segments: Segment[];
  /** Requests to drop now: past their deadline, or (Our-Tardy) predicted to miss it. */
  dropped: number[];
}

/** Σ_k h_k(batch at k), from the shallowest occupied stage to the end; `counts[k]` requests wait before stage k. */
export function catchUpMs(counts: readonly number[], latency: StagedLatency): number {
  let total = 0;
  let batch = 0;
  for (let k = 0; k < latency.stages; k++) {
    batch += counts[k] ?? 0;
    if (batch > 0) total += latency.latencyMs(k, batch);
  }
  return total;
}

/** The step a plan runs next: the first segment's members at its shallowest stage, one stage on. */
export function nextStep(plan: OnTimePlan, requests: readonly ActiveRequest[]): { stage: number; members: number[] } | undefined {
  const first = plan.segments[0];
  if (!first) return undefined;
  const stage = Math.min(...first.members.map((i) => requests[i]!.stage));
  return { stage, members: first.members.filter((i) => requests[i]!.stage === stage) };
}

/** Our-Time: the FIFO segmentation with the least Σ completion time (Eq. 1–2); drops only what is past its deadline. */
export function completionTimePlan(requests: readonly ActiveRequest[], nowMs: number, latency: StagedLatency, granularity: UnitGranularity = 'stage'): OnTimePlan {
  const dropped = pastDeadline(requests, nowMs);
  const units = unitsOf(requests, without(requests, dropped), granularity, latency.maxBatch);
  const n = units.length;
  // activeFrom[j]: requests in units j.. — not finished before segment j starts.
  const activeFrom = new Array<number>(n + 1).fill(0);
  for (let j = n - 1; j >= 0; j--) activeFrom[j] = activeFrom[j + 1]! + units[j]!.members.length;
  const best = new Array<number>(n + 1).fill(Infinity);
  const split = new Array<number>(n + 1).fill(0);
  best[0] = 0;
  for (let i = 1; i <= n; i++) {
    forEachSegmentEndingAt(units, i - 1, latency, (j, durationMs) => {
      const cost = best[j]! + activeFrom[j]! * durationMs;
      if (cost < best[i]!) [best[i], split[i]] = [cost, j];
    });
  }
  return { segments: segmentsOf(units, split, nowMs, latency), dropped };
}

/** Our-Tardy: segments scored by (tardy, end); the predicted-tardy are dropped and the plan made again until none are. */
export function tardyPlan(requests: readonly ActiveRequest[], nowMs: number, latency: StagedLatency, granularity: UnitGranularity = 'stage'): OnTimePlan {
  const dropped = pastDeadline(requests, nowMs);
  for (;;) {
    const units = unitsOf(requests, without(requests, dropped), granularity, latency.maxBatch);
    const n = units.length;
    const tardy = new Array<number>(n + 1).fill(Infinity);
    const end = new Array<number>(n + 1).fill(Infinity);
    const split = new Array<number>(n + 1).fill(0);
    [tardy[0], end[0]] = [0, nowMs];
    for (let i = 1; i <= n; i++) {
      forEachSegmentEndingAt(units, i - 1, latency, (j, durationMs) => {
        const segmentEnd = end[j]! + durationMs;
        let late = tardy[j]!;
        for (let u = j; u < i; u++) for (const m of units[u]!.members) if (requests[m]!.deadlineMs < segmentEnd) late++;
        if (late < tardy[i]! || (late === tardy[i]! && segmentEnd < end[i]!)) [tardy[i], end[i], split[i]] = [late, segmentEnd, j];
      });
    }
    const segments = segmentsOf(units, split, nowMs, latency);
    const late = segments.flatMap((s) => s.members.filter((m) => requests[m]!.deadlineMs < s.endMs));
    if (late.length === 0) return { segments, dropped };
    dropped.push(...late);
  }
}

/**
 * The batching-aware EDF baseline (§2.5a): in deadline order, a request joins the batch if the
 * batch with it, run as one segment now, still meets every member's deadline. A request that
 * cannot make it even alone, while the batch is empty, is dropped.
 */
export function edfBatch(requests: readonly ActiveRequest[], nowMs: number, latency: StagedLatency): OnTimePlan {
  const dropped = pastDeadline(requests, nowMs);
  const byDeadline = without(requests, dropped).sort((a, b) => requests[a]!.deadlineMs - requests[b]!.deadlineMs);
  const counts = new Array<number>(latency.stages).fill(0);
  const members: number[] = [];
  let tightestMs = Infinity;
  let endMs = nowMs;
  for (const i of byDeadline) {
    if (members.length === latency.maxBatch) break;
    const { stage, deadlineMs } = requests[i]!;
    counts[stage]! += 1;
    const withIt = nowMs + catchUpMs(counts, latency);
    if (withIt <= Math.min(tightestMs, deadlineMs)) {
      members.push(i);
      tightestMs = Math.min(tightestMs, deadlineMs);
      endMs = withIt;
    } else {
      counts[stage]! -= 1;
      if (members.length === 0) dropped.push(i);
    }
  }
  return { segments: members.length > 0 ? [{ members: fifo(requests, members), endMs }] : [], dropped };
}

interface Unit {
  stage: number;
  members: number[];
}

const pastDeadline = (requests: readonly ActiveRequest[], nowMs: number): number[] => requests.flatMap((r, i) => (r.deadlineMs < nowMs ? [i] : []));

function without(requests: readonly ActiveRequest[], dropped: readonly number[]): number[] {
  const out = new Set(dropped);
  return requests.flatMap((_, i) => (out.has(i) ? [] : [i]));
}

/** Deepest stage first; within a stage, earliest deadline first. */
const fifo = (requests: readonly ActiveRequest[], indices: number[]): number[] =>
  indices.sort((a, b) => requests[b]!.stage - requests[a]!.stage || requests[a]!.deadlineMs - requests[b]!.deadlineMs);

function unitsOf(requests: readonly ActiveRequest[], indices: number[], granularity: UnitGranularity, maxBatch: number): Unit[] {
  const units: Unit[] = [];
  for (const i of fifo(requests, indices)) {
    const stage = requests[i]!.stage;
    const last = units.at(-1);
    if (granularity === 'stage' && last?.stage === stage && last.members.length < maxBatch) last.members.push(i);
    else units.push({ stage, members: [i] });
  }
  return units;
}

/**
 * Every segment [j, i] of units ending at unit i, by j from i down, with its duration; stops
 * once the segment would exceed B (the bounded-B rule: larger segments only grow).
 */
function forEachSegmentEndingAt(units: readonly Unit[], i: number, latency: StagedLatency, visit: (j: number, durationMs: number) => void): void {
  const counts = new Array<number>(latency.stages).fill(0);
  let size = 0;
  for (let j = i; j >= 0; j--) {
    const unit = units[j]!;
    size += unit.members.length;
    if (size > latency.maxBatch) return;
    counts[unit.stage]! += unit.members.length;
    visit(j, catchUpMs(counts, latency));
  }
}

function segmentsOf(units: readonly Unit[], split: readonly number[], nowMs: number, latency: StagedLatency): Segment[] {
  const bounds: [number, number][] = [];
  for (let i = units.length; i > 0; i = split[i]!) bounds.unshift([split[i]!, i]);
  let endMs = nowMs;
  return bounds.map(([from, to]) => {
    const counts = new Array<number>(latency.stages).fill(0);
    for (const unit of units.slice(from, to)) counts[unit.stage]! += unit.members.length;
    endMs += catchUpMs(counts, latency);
    return { members: units.slice(from, to).flatMap((u) => u.members), endMs };
  });
}
