import { nextStep, tardyPlan, type StagedLatency } from './ontime.js';
import { TARDY_WINDOW, type Queued, type TakenBatch } from './session-queue.js';

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
    // Asked for every session at every batch choice: one pass, nothing allocated.
    let head = Infinity;
    for (const r of this.requests) if (!r.running && r.request.deadlineMs < head) head = r.request.deadlineMs;
    return head;
  }

  /**
   * Whether a step could run now: one at a time, because the plan needs every request's stage
   * (a step chosen while another runs could not merge with the requests in it).
   */
  ready(): boolean {
    return this.requests.length > 0 && !this.requests.some((r) => r.running);
  }

  /**
   * Whether `take` would run a step now: one with a real-time request waits, or the
   * delay-tolerant requests' next step ends by `delayTolerantUntilMs`.
   */
  runnable(nowMs: number, latency: StagedLatency, delayTolerantUntilMs: number): boolean {
    if (!this.ready()) return false;
    if (this.headDeadlineMs() < Infinity) return true;
    const { step } = this.plan(nowMs, latency, this.waiting());
    return step !== undefined && nowMs + latency.latencyMs(step.stage, step.members.length) <= delayTolerantUntilMs;
  }

  /**
   * The next step at `nowMs` (one stage on `batch`, all waiting before it) and what it drops.
   * While a real-time request waits, the plan is over real-time requests only: delay-tolerant
   * ones stay at their stage. Otherwise their step runs if it ends by `delayTolerantUntilMs`.
   */
  take(nowMs: number, latency: StagedLatency, delayTolerantUntilMs = Infinity): TakenBatch<T> & { stage: number } {
    if (!this.ready()) return { stage: 0, batch: [], dropped: [] };
    const realtime = this.headDeadlineMs() < Infinity;
    const { step, window, dropped } = this.plan(nowMs, latency, this.waiting().filter((r) => !realtime || r.request.deadlineMs < Infinity));
    this.remove(new Set(dropped));
    const holds = !realtime && step !== undefined && nowMs + latency.latencyMs(step.stage, step.members.length) > delayTolerantUntilMs;
    const members = step && !holds ? step.members.map((i) => window[i]!) : [];
    for (const m of members) m.running = true;
    return { stage: step?.stage ?? 0, batch: members.map((m) => m.request), dropped: dropped.map((d) => d.request) };
  }

  /** Our-Tardy over `candidates` (the earliest deadlines, up to its window): the next step and the requests it drops. */
  private plan(nowMs: number, latency: StagedLatency, candidates: (typeof this.requests)[number][]) {
    const window = candidates.sort((a, b) => a.request.deadlineMs - b.request.deadlineMs).slice(0, TARDY_WINDOW);
    const active = window.map((r) => ({ stage: r.stage, deadlineMs: r.request.deadlineMs }));
    const planned = tardyPlan(active, nowMs, latency);
    return { window, step: nextStep(planned, active), dropped: planned.dropped.map((i) => window[i]!) };
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
