import { tardyPlan } from './ontime.js';

/** A request waiting in a session's queue. */
export interface Queued<T> {
  deadlineMs: number;
  item: T;
  /** A blank run that measures a model before its first request: real-time work (plan-ahead never holds it), no stream's arrival, not counted as work. */
  warmUp?: boolean;
}

export interface TakenBatch<T> {
  batch: Queued<T>[];
  /** Requests that can no longer meet their deadline, dropped before the batch. */
  dropped: Queued<T>[];
}

/** ℓ(b): the worst-case time of a batch of b on the device, ms. */
export type BatchLatency = (batch: number) => number;

/**
 * How a session's batch is formed when its turn comes (Nexus §4.3, §6.3), from a queue ordered
 * by deadline, never waiting for a batch to fill:
 * - `early` (Nexus): slide a window of the target batch from the head; the first window whose
 *   head (the tightest deadline in it) still makes its deadline when the whole window runs,
 *   now + ℓ(|window|) ≤ deadline, is the batch, and every request before it is dropped. A
 *   request that would force a small batch is dropped before it costs a slot.
 * - `lazy` (Clipper, the baseline): a request is dropped only once it cannot finish in time even
 *   alone; the batch is the largest b up to the target that the oldest request's deadline
 *   allows. The paper says lazy drop shrinks the batch "in order to meet the deadline"; serving
 *   a hopeless request late would only make it worse.
 * The backend and the scheduler's simulator both form batches with `chooseBatch`.
 */
export type DropPolicy = 'early' | 'lazy';

/**
 * How a backend forms a session's batch: a drop policy (the sliding window by default), or
 * `tardy`, Our-Tardy over the model run whole (ontime.ts, research/edge-scheduling.md §2.5): the
 * queue is cut into consecutive batches of at most the target with the fewest requests late,
 * the requests that plan still finishes late are dropped now, and the first batch runs.
 */
export type BatchingPolicy = DropPolicy | 'tardy';

/** Our-Tardy plans over at most this many of the earliest deadlines, as the paper's window of 500 active requests; the rest wait for a later turn. */
export const TARDY_WINDOW = 500;

/** Requests [head, start) are dropped; [start, start + size) run as one batch (size 0: none). */
export interface BatchChoice {
  start: number;
  size: number;
}

/** Float noise in deadlines computed two ways must not drop a request. */
const SLACK_MS = 1e-9;

/** Over the requests [head, end) of a deadline-ordered queue, where `deadlineAt(i)` is request i's deadline. */
export function chooseBatch(
  policy: DropPolicy,
  deadlineAt: (index: number) => number,
  head: number,
  end: number,
  nowMs: number,
  targetBatch: number,
  latency: BatchLatency,
): BatchChoice {
  if (policy === 'early') {
    for (let start = head; start < end; start++) {
      const size = Math.min(targetBatch, end - start);
      if (nowMs + latency(size) <= deadlineAt(start) + SLACK_MS) return { start, size };
    }
    return { start: end, size: 0 };
  }
  let start = head;
  while (start < end && nowMs + latency(1) > deadlineAt(start) + SLACK_MS) start++;
  if (start === end) return { start, size: 0 };
  let size = Math.min(targetBatch, end - start);
  while (size > 1 && nowMs + latency(size) > deadlineAt(start) + SLACK_MS) size--;
  return { start, size };
}

/** A session's queue, ordered by deadline (earliest first). */
export class SessionQueue<T> {
  private readonly queue: Queued<T>[] = [];

  get length(): number {
    return this.queue.length;
  }

  push(request: Queued<T>): void {
    this.queue.splice(this.after(request.deadlineMs), 0, request);
  }

  /** Requests taken out unrun go back where they were: before any of the same deadline that came later. */
  putBack(requests: readonly Queued<T>[]): void {
    for (const request of [...requests].reverse()) this.queue.splice(this.firstDue((d) => d >= request.deadlineMs), 0, request);
  }

  /** The index of the first request due later than `deadlineMs`: equal deadlines keep arrival order. */
  private after(deadlineMs: number): number {
    return this.firstDue((d) => d > deadlineMs);
  }

  /** Binary search: the index of the first request whose deadline passes `due` (which holds from some index on). */
  private firstDue(due: (deadlineMs: number) => boolean): number {
    let lo = 0;
    let hi = this.queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (due(this.queue[mid]!.deadlineMs)) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  /**
   * The next batch of real-time requests by `policy`, and what it drops with it. Delay-tolerant
   * requests (due at Infinity, queued last) never size its window nor cost a real-time request
   * its place: they fill the slots left up to the target batch, as many as keep the batch ending
   * by its tightest deadline and by `fillUntilMs` (plan-ahead's latest end), else run only when
   * no real-time request is left (`takeFirst`).
   */
  take(policy: BatchingPolicy, nowMs: number, targetBatch: number, latency: BatchLatency, fillUntilMs = -Infinity): TakenBatch<T> {
    const realtime = this.after(Number.MAX_VALUE);
    let taken: TakenBatch<T>;
    if (policy === 'tardy') taken = this.takeOnTime(nowMs, targetBatch, latency, realtime);
    else {
      const { start, size } = chooseBatch(policy, (i) => this.queue[i]!.deadlineMs, 0, realtime, nowMs, targetBatch, latency);
      const dropped = this.queue.splice(0, start);
      taken = { dropped, batch: this.queue.splice(0, size) };
    }
    if (taken.batch.length === 0) return taken;
    const endBy = Math.min(fillUntilMs, ...taken.batch.map((r) => r.deadlineMs));
    const tolerant = this.after(Number.MAX_VALUE);
    let fill = Math.min(targetBatch - taken.batch.length, this.queue.length - tolerant);
    while (fill > 0 && nowMs + latency(taken.batch.length + fill) > endBy + SLACK_MS) fill--;
    return { ...taken, batch: [...taken.batch, ...this.queue.splice(tolerant, Math.max(0, fill))] };
  }

  private takeOnTime(nowMs: number, targetBatch: number, latency: BatchLatency, realtime: number): TakenBatch<T> {
    const window = this.queue.slice(0, Math.min(TARDY_WINDOW, realtime));
    const plan = tardyPlan(
      window.map((r) => ({ stage: 0, deadlineMs: r.deadlineMs })),
      nowMs,
      { stages: 1, maxBatch: targetBatch, latencyMs: (_stage, b) => latency(b) },
      'request',
    );
    const batch = new Set(plan.segments[0]?.members);
    const dropped = new Set(plan.dropped);
    this.queue.splice(0, window.length, ...window.filter((_, i) => !batch.has(i) && !dropped.has(i)));
    return { batch: window.filter((_, i) => batch.has(i)), dropped: window.filter((_, i) => dropped.has(i)) };
  }

  /** The earliest deadline queued; Infinity when empty or only delay-tolerant requests are. */
  headDeadlineMs(): number {
    return this.queue[0]?.deadlineMs ?? Infinity;
  }

  /** The first `count` requests, as they are. */
  takeFirst(count: number): Queued<T>[] {
    return this.queue.splice(0, count);
  }

  /** Everything still queued, for a session that leaves this backend. */
  takeAll(): Queued<T>[] {
    return this.queue.splice(0);
  }
}
