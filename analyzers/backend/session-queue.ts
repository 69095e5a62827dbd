/** A request waiting in a session's queue. */
export interface Queued<T> {
  deadlineMs: number;
  item: T;
}

export interface TakenBatch<T> {
  batch: Queued<T>[];
  /** Requests that can no longer meet their deadline, dropped before the batch. */
  dropped: Queued<T>[];
}

/** ℓ(b): the worst-case time of a batch of b on the device, ms. */
export type BatchLatency = (batch: number) => number;

/**
 * A session's queue, ordered by deadline (earliest first), with the two drop policies of
 * Nexus §4.3: early drop (the Nexus rule) and lazy drop (Clipper's), the baseline.
 */
export class SessionQueue<T> {
  private readonly queue: Queued<T>[] = [];

  get length(): number {
    return this.queue.length;
  }

  push(request: Queued<T>): void {
    // Binary search for the first later deadline: requests with equal deadlines keep arrival order.
    let lo = 0;
    let hi = this.queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.queue[mid]!.deadlineMs <= request.deadlineMs) lo = mid + 1;
      else hi = mid;
    }
    this.queue.splice(lo, 0, request);
  }

  /**
   * Early drop: slide a window of the target batch B from the head; the first window whose head
   * (the tightest deadline in it) can still finish the whole window, now + ℓ(|window|) ≤ its
   * deadline, is the batch, and every request before it is dropped. A request the batch would
   * make late is dropped before it costs a slot, so the batch stays large enough to keep up.
   */
  takeEarly(nowMs: number, targetBatch: number, latency: BatchLatency): TakenBatch<T> {
    for (let i = 0; i < this.queue.length; i++) {
      const size = Math.min(targetBatch, this.queue.length - i);
      if (nowMs + latency(size) <= this.queue[i]!.deadlineMs) {
        const dropped = this.queue.splice(0, i);
        return { dropped, batch: this.queue.splice(0, size) };
      }
    }
    return { dropped: this.queue.splice(0), batch: [] };
  }

  /**
   * Lazy drop (Clipper): a request is dropped only once it cannot finish in time even alone
   * (now + ℓ(1) past its deadline); the batch is the largest b up to `maxBatch` that the oldest
   * request's deadline allows, now + ℓ(b) ≤ it. The paper's "shrinks the batch in order to meet
   * the deadline", read as the Panoptes simulator reads it (`scheduler/simulator`).
   */
  takeLazy(nowMs: number, maxBatch: number, latency: BatchLatency): TakenBatch<T> {
    let hopeless = 0;
    while (hopeless < this.queue.length && nowMs + latency(1) > this.queue[hopeless]!.deadlineMs) hopeless++;
    const dropped = this.queue.splice(0, hopeless);
    const head = this.queue[0];
    if (!head) return { dropped, batch: [] };
    let size = Math.min(maxBatch, this.queue.length);
    while (size > 1 && nowMs + latency(size) > head.deadlineMs) size--;
    return { dropped, batch: this.queue.splice(0, size) };
  }

  /** Everything still queued, for a session that leaves this backend. */
  takeAll(): Queued<T>[] {
    return this.queue.splice(0);
  }
}
