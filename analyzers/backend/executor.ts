import type { StagedLatency } from './ontime.js';
import { RealtimeForecast } from './plan-ahead.js';
import { SessionQueue, type BatchLatency, type BatchingPolicy, type Queued, type TakenBatch } from './session-queue.js';
import { StagedQueue } from './staged-queue.js';

/**
 * How one session's batch is run, in three steps so that only the middle one holds the
 * accelerator: `prepare` (CPU: resize, letterbox, stack), `execute` (the device, on the
 * runtime's worker thread), `finish` (CPU: decode outputs, publish). Nexus §6.3: the next
 * batch is prepared while the current one executes, and the previous one finishes meanwhile.
 */
export interface ExecutableSession<T, P, R> {
  id: string;
  /** Target batch from the plan; early drop sizes its window by it. */
  targetBatch: number;
  /** ℓ(b), ms: the profile's worst case, used to judge whether a batch can meet its deadlines. */
  latency: BatchLatency;
  /**
   * ℓ(b) as this backend measures it now. Plan-ahead sizes delay-tolerant work by the larger of
   * this and `latency`, so that cores taken by other processes do not make live batches late.
   */
  measuredLatency?: BatchLatency;
  /**
   * The model run in stages (group-wise execution, staged-queue.ts): each step runs one stage
   * on the requests Our-Tardy picks, h_k(b) per stage. A step of delay-tolerant requests only
   * runs while no real-time request waits elsewhere and plan-ahead lets it end in time.
   */
  stageLatency?: StagedLatency;
  /** `stage`: the stage a staged session's step runs (0 otherwise). */
  prepare(batch: readonly Queued<T>[], stage: number): P | Promise<P>;
  execute(prepared: P): Promise<R>;
  finish(batch: readonly Queued<T>[], result: R | undefined, error: unknown, stage: number): Promise<void>;
}

export interface ExecutorOptions<T> {
  policy: BatchingPolicy;
  /**
   * Size or hold delay-tolerant batches (deadline Infinity) so that they leave the device before
   * the next real-time batch must start (DeepQuery's plan-ahead, plan-ahead.ts). Off: they run
   * whenever no real-time request waits, at the target batch (naive co-location).
   * @defaultValue true
   */
  planAhead?: boolean;
  /**
   * Batches that execute at once: the runtime's worker threads, each with its share of the
   * cores. On a GPU one (Nexus: exclusive use of the device); on a CPU, batches on a core each
   * can run more frames a second than one batch on all of them (docs/performance.md).
   * @defaultValue 1
   */
  lanes?: number;
  now: () => number;
  /** Requests that can no longer meet their deadline, with the session they were in. */
  onDrop: (session: string, dropped: Queued<T>[]) => void;
  /** A batch began executing (for stats and tests): its session, size and start time. */
  onExecute?: (session: string, size: number, startedMs: number) => void;
}

export interface Executor<T, P, R> {
  /** Sessions run in this order, round-robin: the plan's duty-cycle order. */
  setSessions(sessions: readonly ExecutableSession<T, P, R>[]): void;
  submit(session: string, request: Queued<T>): void;
  /** Requests queued per session. */
  queued(): Record<string, number>;
  /** Sessions in the rotation or with a batch not yet finished: their models must stay loaded. */
  inUse(): Set<string>;
  /** Stops taking turns once the queues are empty and every batch has finished. */
  drain(): Promise<void>;
}

/** Plan-ahead keeps the time of a real-time batch at its target, times this, free before it must start. */
const RESERVE_MARGIN = 1.1;

/**
 * Runs sessions' batches in `lanes` (one: exclusive use of the device), round-robin in the order
 * given. At each session's turn the queue yields a batch by the batching policy (early drop, the lazy
 * baseline, or Our-Tardy); it does not wait for the target batch to fill. While batch k executes in a
 * lane, the lane's next session with work prepares batch k+1, judged against the time k is
 * expected to end; batch k−1 finishes on the event loop meanwhile. A lane starts only when there
 * is a batch for it, and ends when it finds none.
 */
export function createExecutor<T, P, R>(options: ExecutorOptions<T>): Executor<T, P, R> {
  /** A batch taken from its session's queue, preparing; `returned` once it went back to the queue unrun. */
  type Chosen = { session: ExecutableSession<T, P, R>; batch: Queued<T>[]; stage: number; prepared: Promise<P>; returned?: boolean };
  let sessions: ExecutableSession<T, P, R>[] = [];
  /** The sessions of the plan in force; the others in `sessions` are leaving. */
  let planned = new Set<string>();
  const queues = new Map<string, SessionQueue<T> | StagedQueue<T>>();
  const finishing = new Set<Promise<void>>();
  /** Batches taken and not yet finished, per session. */
  const unfinished = new Map<string, number>();
  const lanes = Math.max(1, options.lanes ?? 1);
  let turn = 0;
  const forecast = new RealtimeForecast();
  const planAhead = options.planAhead ?? true;
  let draining = false;
  let wakeTimer: NodeJS.Timeout | undefined;
  /** Lanes running now. */
  let active = 0;
  /** `drain` calls waiting for the lanes to stop. */
  let wakers: (() => void)[] = [];

  const queueOf = (id: string): SessionQueue<T> | StagedQueue<T> => {
    let queue = queues.get(id);
    if (!queue) queues.set(id, (queue = sessions.find((s) => s.id === id)?.stageLatency ? new StagedQueue<T>() : new SessionQueue<T>()));
    return queue;
  };

  /** ℓ(b) as plan-ahead judges it: the profile's, or what the backend measures where that is longer. */
  const aheadLatency = (session: ExecutableSession<T, P, R>, batch: number): number => Math.max(session.latency(batch), session.measuredLatency?.(batch) ?? 0);

  /**
   * When delay-tolerant work must leave the device: before the next real-time batch must start
   * (plan-ahead), or at once while a real-time request of another session than `except` waits.
   * Otherwise Infinity without plan-ahead, or draining.
   */
  const delayTolerantUntilMs = (except?: string): number => {
    if (sessions.some((s) => s.id !== except && queueOf(s.id).headDeadlineMs() < Infinity)) return -Infinity;
    if (!planAhead || draining) return Infinity;
    // A tenth more than ℓ: a measured ℓ is a mean, and timers fire a little late.
    const reserve = (id: string): number => {
      const s = sessions.find((x) => x.id === id);
      return s ? RESERVE_MARGIN * aheadLatency(s, s.targetBatch) : 0;
    };
    // The forecast is of arrivals on the clock now, whenever the batch it sizes will start.
    return forecast.latestEndMs(options.now(), reserve);
  };

  /** How many of a session's delay-tolerant requests may run at `atMs` (none left of real-time work): the most that end in time, up to the target batch. */
  const delayTolerantSize = (session: ExecutableSession<T, P, R>, atMs: number): number => {
    const budgetMs = delayTolerantUntilMs() - atMs;
    let size = Math.min(session.targetBatch, queueOf(session.id).length);
    while (size > 0 && aheadLatency(session, size) > budgetMs) size--;
    return size;
  };

  /** Whether a session's queue can yield a batch at `atMs`: real-time requests, or delay-tolerant ones plan-ahead lets run. */
  const runnable = (session: ExecutableSession<T, P, R>, atMs: number): boolean => {
    const queue = queueOf(session.id);
    if (queue instanceof StagedQueue) return queue.runnable(atMs, session.stageLatency!, delayTolerantUntilMs(session.id));
    return queue.length > 0 && (queue.headDeadlineMs() < Infinity || delayTolerantSize(session, atMs) > 0);
  };

  /** A session's next batch at `atMs` by its queue: a staged step, plan-ahead's delay-tolerant batch, or the batching policy's. */
  const take = (session: ExecutableSession<T, P, R>, atMs: number): TakenBatch<T> & { stage: number } => {
    const queue = queueOf(session.id);
    if (queue instanceof StagedQueue) return queue.take(atMs, session.stageLatency!, delayTolerantUntilMs(session.id));
    // Only delay-tolerant requests left (they sort last): plan-ahead sizes the batch.
    if (queue.headDeadlineMs() === Infinity) return { stage: 0, batch: queue.takeFirst(delayTolerantSize(session, atMs)), dropped: [] };
    return { stage: 0, ...queue.take(options.policy, atMs, session.targetBatch, session.latency, delayTolerantUntilMs(session.id)) };
  };

  /** The next session in turn with a batch to run at `atMs`, and that batch prepared. */
  const nextBatch = (atMs: number): Chosen | undefined => {
    for (let tried = 0, n = sessions.length; tried < n && sessions.length > 0; tried++) {
      const index = turn % sessions.length;
      const session = sessions[index]!;
      const queue = queueOf(session.id);
      const { batch, dropped, stage } = take(session, atMs);
      if (dropped.length > 0) options.onDrop(session.id, dropped);
      if (queue.length === 0 && !planned.has(session.id)) {
        // A leaving session with nothing left: out of the rotation; the next one moves into its place.
        sessions.splice(index, 1);
        queues.delete(session.id);
        turn = index;
      } else {
        turn = index + 1;
      }
      if (batch.length === 0) continue;
      unfinished.set(session.id, (unfinished.get(session.id) ?? 0) + 1);
      // Native pre-processing runs on libuv's threads while the batch before executes.
      const chosen = { session, batch, stage } as Chosen;
      chosen.prepared = prepareApart(chosen);
      chosen.prepared.catch(() => undefined); // its failure is the batch's, handled where it is awaited
      return chosen;
    }
    return undefined;
  };

  /**
   * A batch prepared; where that fails, each of its requests is prepared alone, so that one bad
   * input (a corrupt JPEG) fails only its own request: it is finished with its own error, and
   * the others run as a batch without it (`chosen.batch` shrinks).
   */
  const prepareApart = async (chosen: Chosen): Promise<P> => {
    const { session, batch, stage } = chosen;
    try {
      return await session.prepare(batch, stage);
    } catch (err) {
      if (batch.length === 1) throw err;
      const alone = await Promise.allSettled(batch.map(async (r) => session.prepare([r], stage)));
      const kept = batch.filter((_, i) => alone[i]!.status === 'fulfilled');
      // Every one fails alone too, or none does (a failure of the batch, not of an input): the
      // batch's. Put back meanwhile: its requests are queued again, for another batch to settle.
      if (kept.length === 0 || kept.length === batch.length || chosen.returned) throw err;
      alone.forEach((result, i) => {
        if (result.status === 'fulfilled') return;
        unfinished.set(session.id, (unfinished.get(session.id) ?? 0) + 1);
        track(session, [batch[i]!], stage, undefined, result.reason);
      });
      chosen.batch = kept;
      return session.prepare(kept, stage);
    }
  };

  /** Finishes a batch off the loop; the session stays in use until it has. */
  const track = (session: ExecutableSession<T, P, R>, batch: Queued<T>[], stage: number, result: R | undefined, error: unknown): void => {
    const queue = queues.get(session.id);
    // A staged step's requests are free for the next step at once; a failed step's are done.
    if (queue instanceof StagedQueue) queue.stepped(batch, session.stageLatency!.stages, result === undefined);
    const settled = session
      .finish(batch, result, error, stage)
      .catch(() => undefined)
      .finally(() => {
        finishing.delete(settled);
        release(session.id);
      });
    finishing.add(settled);
  };

  async function loop(): Promise<void> {
    /** A delay-tolerant batch chosen ahead that plan-ahead no longer lets run: kept prepared for when it does. */
    let held: Chosen | undefined;
    let next = nextBatch(options.now());
    while (next) {
      const chosen = next;
      const { session, stage, prepared } = chosen;
      const startedMs = options.now();
      options.onExecute?.(session.id, chosen.batch.length, startedMs);
      const executing = prepared.then((p) => session.execute(p));
      // Prepared now, run when this batch ends: judged against that end, not against now. Only
      // when every lane is busy: an idle lane would run it at once instead.
      const durationMs = session.stageLatency ? session.stageLatency.latencyMs(stage, chosen.batch.length) : aheadLatency(session, chosen.batch.length);
      next = active >= lanes ? nextBatch(startedMs + durationMs) : undefined;
      // The batch as prepared: without the requests that failed alone.
      try {
        const result = await executing;
        track(session, chosen.batch, stage, result, undefined);
      } catch (err) {
        track(session, chosen.batch, stage, undefined, err);
      }
      if (next && !stillFits(next)) {
        if (held) putBack(held);
        [held, next] = [next, undefined];
      }
      if (!next && held && stillFits(held)) [next, held] = [held, undefined];
      next ??= nextBatch(options.now());
    }
    // Nothing else runs now: what is held goes back to its queue, for the lanes to take when plan-ahead lets it.
    if (held) putBack(held);
  }

  /**
   * Whether a batch chosen ahead still runs now: a delay-tolerant one only while plan-ahead
   * lets it end in time. A real-time request that arrived while the batch before ran would
   * otherwise wait behind it.
   */
  const stillFits = ({ session, batch }: Chosen): boolean =>
    session.stageLatency !== undefined || batch.some((r) => r.deadlineMs < Infinity) || options.now() + aheadLatency(session, batch.length) <= delayTolerantUntilMs();

  /**
   * A batch chosen ahead goes back to the head of its queue, unrun (its preparation is lost);
   * a leaving session that had given it up rejoins the rotation to serve it.
   */
  const putBack = (chosen: Chosen): void => {
    const { session, batch } = chosen;
    chosen.returned = true;
    if (!sessions.includes(session)) sessions.push(session);
    const queue = queueOf(session.id);
    if (queue instanceof SessionQueue) queue.putBack(batch);
    release(session.id);
  };

  /** One of a session's batches is done with (finished, or put back). */
  const release = (id: string): void => {
    const left = (unfinished.get(id) ?? 1) - 1;
    if (left > 0) unfinished.set(id, left);
    else unfinished.delete(id);
  };

  // Only a session in the rotation can take its queue's turn; kicking for any other would spin.
  // Delay-tolerant work plan-ahead holds is not work yet: a timer wakes the lanes when the
  // forecast changes (a real-time arrival wakes them too).
  const hasWork = (): boolean => {
    const now = options.now();
    if (sessions.some((s) => runnable(s, now))) return true;
    if (!wakeTimer && sessions.some((s) => queueOf(s.id).length > 0)) {
      const atMs = forecast.nextChangeMs(now);
      if (atMs < Infinity) {
        wakeTimer = setTimeout(() => {
          wakeTimer = undefined;
          kick();
        }, Math.max(1, atMs - now));
        wakeTimer.unref();
      }
    }
    return false;
  };

  const kick = (): void => {
    while (active < lanes) {
      active += 1;
      // A lane takes its first batch before `loop` first awaits, so `hasWork` below sees what is left.
      void loop().finally(() => {
        active -= 1;
        if (hasWork()) kick();
        if (active === 0) {
          for (const wake of wakers) wake();
          wakers = [];
        }
      });
      if (!hasWork()) return;
    }
  };

  return {
    setSessions(next) {
      const ids = new Set(next.map((s) => s.id));
      // A session that leaves still serves what it holds (in-flight work is never lost); it
      // leaves the rotation once its queue is empty.
      const leaving = sessions.filter((s) => !ids.has(s.id) && queueOf(s.id).length > 0);
      for (const s of sessions) if (!ids.has(s.id) && !leaving.includes(s)) queues.delete(s.id);
      sessions = [...next, ...leaving];
      // Requests queued before their session was known to run in stages start at stage 0.
      for (const s of next) {
        const queue = queues.get(s.id);
        if (s.stageLatency && queue instanceof SessionQueue) {
          queues.delete(s.id);
          for (const request of queue.takeAll()) queueOf(s.id).push(request);
        }
      }
      planned = ids;
      turn = 0;
      kick();
    },
    submit(session, request) {
      if (request.deadlineMs < Infinity && !request.warmUp) forecast.arrived(session, options.now(), request.deadlineMs);
      queueOf(session).push(request);
      if (sessions.some((s) => s.id === session)) kick();
    },
    queued: () => Object.fromEntries([...queues].map(([id, q]) => [id, q.length])),
    inUse: () => new Set([...sessions.map((s) => s.id), ...unfinished.keys()]),
    async drain() {
      // Nothing real-time is coming any more: what plan-ahead holds runs now.
      draining = true;
      clearTimeout(wakeTimer);
      wakeTimer = undefined;
      kick();
      while (active > 0 || finishing.size > 0) {
        if (active > 0) await new Promise<void>((resolve) => wakers.push(resolve));
        await Promise.all([...finishing]);
      }
    },
  };
}
