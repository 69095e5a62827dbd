import { EPSILON } from '../worst-case.js';

/**
 * How a backend forms a session's batch when the session's turn comes (Nexus §4.3, §6.3;
 * digest §2.6). Both take the session's queue ordered by deadline and never wait for a batch
 * to fill.
 *
 * - `early` (Nexus): slide a window of the plan's batch size from the head; the first window
 *   whose earliest request still makes its deadline when the whole window runs is the batch,
 *   and every request before it is dropped. Requests that would force a small batch are
 *   skipped, so batches stay near the size the plan counted on.
 * - `lazy` (Clipper): drop only requests that have missed their deadline; the batch is the
 *   largest (up to the plan's) that the oldest request's remaining time allows. Under bursts it
 *   keeps serving the oldest in small batches that never amortise β, and falls further behind
 *   (Fig. 5). *Silent in the paper:* "missed" is read as "cannot finish in time even alone",
 *   because the paper says lazy drop shrinks the batch "in order to meet the deadline"; serving
 *   such a request at batch 1 and finishing late would only make lazy drop worse.
 */
export type DropPolicy = 'early' | 'lazy';

/** What a request needs for batching: when its batch must finish on the GPU, ms. */
export interface Deadlined {
  dueMs: number;
}

/** Requests [head, start) of the queue are dropped; [start, start + size) run as one batch (size 0: nothing runs). */
export interface BatchChoice {
  start: number;
  size: number;
}

export function chooseBatch(
  policy: DropPolicy,
  queue: readonly Deadlined[],
  head: number,
  nowMs: number,
  targetBatch: number,
  latency: (batch: number) => number,
): BatchChoice {
  return policy === 'early' ? earlyDrop(queue, head, nowMs, targetBatch, latency) : lazyDrop(queue, head, nowMs, targetBatch, latency);
}

/** The sliding window: since the queue is ordered by deadline, the window's first request is its tightest. */
function earlyDrop(queue: readonly Deadlined[], head: number, nowMs: number, targetBatch: number, latency: (b: number) => number): BatchChoice {
  for (let start = head; start < queue.length; start++) {
    const size = Math.min(targetBatch, queue.length - start);
    if (nowMs + latency(size) <= (queue[start] as Deadlined).dueMs + EPSILON) return { start, size };
  }
  return { start: queue.length, size: 0 };
}

function lazyDrop(queue: readonly Deadlined[], head: number, nowMs: number, targetBatch: number, latency: (b: number) => number): BatchChoice {
  let start = head;
  const alone = nowMs + latency(1);
  while (start < queue.length && alone > (queue[start] as Deadlined).dueMs + EPSILON) start++;
  const oldest = queue[start];
  if (!oldest) return { start, size: 0 };
  let size = Math.min(targetBatch, queue.length - start);
  while (size > 1 && nowMs + latency(size) > oldest.dueMs + EPSILON) size--;
  return { start, size };
}
