import type { Stats } from '../../core/index.js';

interface SessionCounts {
  arrivals: number;
  batchSizes: number[];
  latenciesMs: number[];
  dropped: number;
  late: number;
}

/**
 * What a backend saw during one stats interval (a second by default): per session the arrivals,
 * batch sizes, latencies and drops; per DAG edge the fan-out γ; per app the frames taken in and
 * its requests on time, late or dropped.
 * `take` turns it into a `Stats` message and starts the next interval.
 */
export function createStatsWindow(backend: string, startMs: number) {
  let fromMs = startMs;
  let sessions = new Map<string, SessionCounts>();
  let edges = new Map<string, { app: string; from: string; to: string; parents: number; children: number }>();
  let frames = new Map<string, number>();
  let tolerantFrames = new Map<string, number>();
  let apps = new Map<string, { requests: number; late: number; dropped: number }>();

  const session = (id: string): SessionCounts => {
    let counts = sessions.get(id);
    if (!counts) sessions.set(id, (counts = { arrivals: 0, batchSizes: [], latenciesMs: [], dropped: 0, late: 0 }));
    return counts;
  };
  const appCounts = (name: string) => {
    let counts = apps.get(name);
    if (!counts) apps.set(name, (counts = { requests: 0, late: 0, dropped: 0 }));
    return counts;
  };
  const edge = (app: string, from: string, to: string) => {
    const key = `${app}/${from}>${to}`;
    let counts = edges.get(key);
    if (!counts) edges.set(key, (counts = { app, from, to, parents: 0, children: 0 }));
    return counts;
  };

  return {
    /** A frame for `app`, from a real-time source or a delay-tolerant one. */
    frame: (app: string, delayTolerant = false): void => {
      frames.set(app, (frames.get(app) ?? 0) + 1);
      if (delayTolerant) tolerantFrames.set(app, (tolerantFrames.get(app) ?? 0) + 1);
    },
    arrival: (id: string): void => void (session(id).arrivals += 1),
    batch: (id: string, size: number): void => void session(id).batchSizes.push(size),
    /** A request of `appName` to session `id` finished. */
    done: (id: string, latencyMs: number, late: boolean, appName?: string): void => {
      const counts = session(id);
      counts.latenciesMs.push(latencyMs);
      if (late) counts.late += 1;
      if (appName === undefined) return;
      const ofApp = appCounts(appName);
      ofApp.requests += 1;
      if (late) ofApp.late += 1;
    },
    dropped: (id: string, n = 1, appName?: string): void => {
      session(id).dropped += n;
      if (appName === undefined) return;
      const ofApp = appCounts(appName);
      ofApp.requests += n;
      ofApp.dropped += n;
    },
    /** A request to `from` was served and sent `children` tasks down the edge to `to`. */
    fannedOut: (app: string, from: string, to: string, children: number): void => {
      const counts = edge(app, from, to);
      counts.parents += 1;
      counts.children += children;
    },

    take(nowMs: number, queued: Readonly<Record<string, number>>): Stats {
      const seconds = Math.max(1e-3, (nowMs - fromMs) / 1000);
      for (const id of Object.keys(queued)) session(id);
      const stats: Stats = {
        backend,
        fromMs,
        toMs: nowMs,
        sessions: [...sessions].map(([id, c]) => {
          const handled = c.latenciesMs.length + c.dropped;
          return {
            session: id,
            arrivalRate: c.arrivals / seconds,
            queueLength: queued[id] ?? 0,
            batchSizes: c.batchSizes,
            latencyP50Ms: percentile(c.latenciesMs, 0.5),
            latencyP99Ms: percentile(c.latenciesMs, 0.99),
            dropped: c.dropped,
            badRate: handled === 0 ? 0 : (c.dropped + c.late) / handled,
          };
        }),
        edges: [...edges.values()].map(({ app, from, to, parents, children }) => ({ app, from, to, gamma: parents === 0 ? 0 : children / parents })),
        apps: [...new Set([...frames.keys(), ...apps.keys()])].map((name) => ({
          app: name,
          framesRate: (frames.get(name) ?? 0) / seconds,
          ...(tolerantFrames.has(name) ? { delayTolerantFramesRate: tolerantFrames.get(name)! / seconds } : {}),
          ...(apps.get(name) ?? { requests: 0, late: 0, dropped: 0 }),
        })),
      };
      fromMs = nowMs;
      sessions = new Map();
      edges = new Map();
      frames = new Map();
      tolerantFrames = new Map();
      apps = new Map();
      return stats;
    },
  };
}

export type StatsWindow = ReturnType<typeof createStatsWindow>;

/** The q-quantile by nearest rank; 0 for no values. */
function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
