/**
 * DeepQuery's plan-ahead (research/deepquery.md §2.8–2.9): real-time and delay-tolerant work
 * (replays faster than real time, backfills) share one device, which cannot be preempted, so
 * delay-tolerant batches are sized, or held, to leave the device before the next real-time
 * batch must start.
 *
 * The paper's clients announce their next queries; here the backend forecasts them from what it
 * measures, per session of real-time requests:
 * - the next arrival: the last one plus the mean gap between arrivals (an EWMA, 0.8 on the old
 *   value, the digest's choice for the paper's unstated α and β); a camera's frames come at a
 *   steady rate, so this is close. Requests within 5 ms are one arrival (a frame's crops come
 *   to a child session together);
 * - the latest start of the batch that serves it: that arrival plus its slack (its deadline less
 *   its arrival, also an EWMA) less ℓ(b) at the plan's target batch, the worst case the plan
 *   reserves for it.
 * A delay-tolerant batch must end by the earliest such start (`latestEndMs`). A session silent
 * for `EXPECTED_GAPS` mean gaps (slacks, before a second arrival) is not expected any more (a
 * source stopped or moved away).
 * *Our choice:* the paper budgets to the next real-time query's arrival (no wait at all); using
 * the stage's slack, which the plan's budgets give, lets more delay-tolerant work through
 * without making a real-time request late.
 */

/** The weight of the previous value in each EWMA. */
const KEEP = 0.8;
/** A session silent this many mean gaps is no longer expected. */
const EXPECTED_GAPS = 4;
/** Requests this close together are one arrival: a frame's crops reach a child session at once. */
const BURST_MS = 5;

interface Arrivals {
  lastMs: number;
  gapMs: number | undefined;
  slackMs: number;
}

export class RealtimeForecast {
  readonly #sessions = new Map<string, Arrivals>();

  /** A real-time request of `session` arrived at `nowMs`, due at `deadlineMs`. */
  arrived(session: string, nowMs: number, deadlineMs: number): void {
    const known = this.#sessions.get(session);
    const slackMs = deadlineMs - nowMs;
    if (!known) {
      this.#sessions.set(session, { lastMs: nowMs, gapMs: undefined, slackMs });
      return;
    }
    known.slackMs = KEEP * known.slackMs + (1 - KEEP) * slackMs;
    const gap = nowMs - known.lastMs;
    if (gap < BURST_MS) return;
    known.gapMs = known.gapMs === undefined ? gap : KEEP * known.gapMs + (1 - KEEP) * gap;
    known.lastMs = nowMs;
  }

  /**
   * When delay-tolerant work must leave the device, ms: before the latest start of the next
   * real-time batch of any session still expected. `reserveMs(session)` is ℓ of that batch.
   * Infinity when no real-time request is expected.
   */
  latestEndMs(nowMs: number, reserveMs: (session: string) => number): number {
    let latest = Infinity;
    for (const [session, a] of this.#sessions) {
      if (!this.#expected(a, nowMs)) continue;
      const nextMs = Math.max(nowMs, a.lastMs + (a.gapMs ?? 0));
      latest = Math.min(latest, nextMs + a.slackMs - reserveMs(session));
    }
    return latest;
  }

  /** When the forecast next changes with time alone (a session stops being expected); Infinity if never. */
  nextChangeMs(nowMs: number): number {
    let next = Infinity;
    for (const a of this.#sessions.values()) if (this.#expected(a, nowMs)) next = Math.min(next, this.#expiresMs(a));
    return next;
  }

  #expected(a: Arrivals, nowMs: number): boolean {
    return nowMs < this.#expiresMs(a);
  }

  /** A session with one arrival so far has no gap yet: it is expected for as many of its slacks. */
  #expiresMs(a: Arrivals): number {
    return a.lastMs + EXPECTED_GAPS * (a.gapMs ?? a.slackMs);
  }
}
