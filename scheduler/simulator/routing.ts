/**
 * Routing a session's requests over the nodes that serve it, in proportion to the rate the plan
 * gives each node (Nexus's routing table of per-backend throughput). Smooth weighted round-robin
 * (as nginx balances upstreams): deterministic and evenly interleaved, so a node planned for
 * exactly its peak throughput sees the spacing of the session's arrivals rather than the extra
 * burstiness of a random pick.
 */
export class WeightedRoundRobin<T> {
  readonly #targets: Target<T>[];
  readonly #total: number;

  constructor(entries: readonly { target: T; weight: number }[]) {
    this.#targets = entries.filter((e) => e.weight > 0).map((e) => ({ ...e, current: 0 }));
    this.#total = this.#targets.reduce((sum, t) => sum + t.weight, 0);
  }

  /** The next target; undefined when nothing serves the session. */
  next(): T | undefined {
    let best: Target<T> | undefined;
    for (const t of this.#targets) {
      t.current += t.weight;
      if (!best || t.current > best.current) best = t;
    }
    if (best) best.current -= this.#total;
    return best?.target;
  }
}

interface Target<T> {
  target: T;
  weight: number;
  /** Smooth WRR's running credit. */
  current: number;
}
