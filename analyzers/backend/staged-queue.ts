import { nextStep, tardyPlan, type StagedLatency } from './ontime.js';
import type { Queued, TakenBatch } from './session-queue.js';

/** Our-Tardy plans over at most this many requests, as the paper's window of 500 active requests; the rest wait for a later step. */
const TARDY_WINDOW = 500;

/** A step of a staged session: one stage run on `batch` (all waiting before it). */
export interface TakenStep<T> extends TakenBatch<T> {
  stage: number;
}

/**
 * A staged session's requests (edge scheduling §2.2): waiting to start, between stages, or in
 * the stage running now. Each step Our-Tardy plans over the requests not running (`tardyPlan`,
 * stage-granular units), drops those it predicts late, and runs the first segment's shallowest
 * members one stage on (`nextStep`), so that early requests wait for later ones to catch up.
 */
export class StagedQueue<T> {
  private readonly requests: { request: Queued<T>; stage: number; running: boolean }[] = [];

  /** Requests not yet past their last stage, running ones included: the session stays while any is left. */
  get length(): number {
    return this.requests.length;
  }

  push(request: Queued<T>): void {
    this.requests.push({ request, stage: 0, running: false });
  }

  /** The earliest deadline among the requests a step could take; Infinity when none. */
  headDeadlineMs(): number {
    return Math.min(...this.waiting().map((r) => r.request.deadlineMs));
  }

  /**
   * Whether a step could run now: one at a time, because the plan needs every request's stage
   * (a step chosen while another runs could not merge with the requests in it).
   */
  ready(): boolean {
    return this.requests.length > 0 && !this.requests.some((r) => r.running);
  }

  take(nowMs: number, latency: StagedLatency): TakenStep<T> {
    if (!this.ready()) return { stage: 0, batch: [], dropped: [] };
    const window = this.waiting()
      .sort((a, b) => a.request.deadlineMs - b.request.deadlineMs)
      .slice(0, TARDY_WINDOW);
    const active = window.map((r) => ({ stage: r.stage, deadlineMs: r.request.deadlineMs }));
    const plan = tardyPlan(active, nowMs, latency);
    const dropped = plan.dropped.map((i) => window[i]!);
    this.remove(new Set(dropped));
    const step = nextStep(plan, active);
    const members = step?.members.map((i) => window[i]!) ?? [];
    for (const m of members) m.running = true;
    return { stage: step?.stage ?? 0, batch: members.map((m) => m.request), dropped: dropped.map((d) => d.request) };
  }

  /** A step ended: its requests move one stage on, and leave after the last (`stages`), or at once when it failed. */
  stepped(batch: readonly Queued<T>[], stages: number, failed: boolean): void {
    const ran = new Set(batch);
    const done = new Set<(typeof this.requests)[number]>();
    for (const r of this.requests) {
      if (!ran.has(r.request)) continue;
      r.running = false;
      r.stage += 1;
      if (failed || r.stage >= stages) done.add(r);
    }
    this.remove(done);
  }

  private waiting(): (typeof this.requests)[number][] {
    return this.requests.filter((r) => !r.running);
  }

  private remove(gone: ReadonlySet<(typeof this.requests)[number]>): void {
    if (gone.size === 0) return;
    const kept = this.requests.filter((r) => !gone.has(r));
    this.requests.splice(0, this.requests.length, ...kept);
  }
}
