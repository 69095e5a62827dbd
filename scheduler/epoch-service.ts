import {
  Groups,
  Channels,
  createLogThrottle,
  describeError,
  repeatedSuffix,
  specializedNodeOf,
  systemClock,
  Topics,
  type Batch,
  type Bus,
  type Clock,
  type Consumer,
  type Lifecycle,
  type Logger,
  type Plan,
  type Stats,
} from '../core/index.js';
import { DEFAULT_REPLAN_RULE, edgeKey, MAX_BACKENDS, planEpoch, replanDue, type AppDemand, type EpochOptions, type EpochState } from './epoch.js';
import type { PrefixFamily } from './prefix-merge.js';
import type { ProfileLookup } from './profile.js';
import { FRAMES } from './query-analysis.js';

export interface EpochServiceOptions extends EpochOptions {
  bus: Bus;
  /** The apps to plan for, without their load (`framesRate` and `gammas` come from stats). */
  apps: readonly Omit<AppDemand, 'framesRate' | 'delayTolerantRate' | 'gammas'>[];
  profileOf: ProfileLookup;
  families?: readonly PrefixFamily[];
  logger: Logger;
  clock?: Clock;
  /** @defaultValue 30000 */
  epochMs?: number;
  /** No two plans closer than this. @defaultValue 10000 */
  minEpochMs?: number;
  /** Re-plan early when the total frame rate moved by this share since the last plan. @defaultValue 0.3 */
  loadChange?: number;
  /** A backend that has not reported for this long is gone. @defaultValue 10000 */
  backendTimeoutMs?: number;
  groupId?: string;
}

export interface EpochServiceStatus {
  state: 'idle' | 'running' | 'draining' | 'closed';
  epoch: number;
  lastPlanAtMs: number | undefined;
  backends: string[];
  warnings: string[];
}

/** Repeating log lines are summarized this often. */
const LOG_INTERVAL_MS = 30_000;
/** New backends named one by one in an interval: more than an honest cluster starts at once. */
const NAMED_REGISTRATIONS = 16;

/**
 * The scheduler role (Nexus §6, "epoch scheduling"): reads every backend's stats from
 * `panoptes.stats`, and every epoch (30 s, sooner when the load moves by more than 30%, never twice
 * within 10 s) plans with `planEpoch` and publishes the plan to `panoptes.plan`, where backends
 * and the sink follow the newest.
 */
export function createEpochService(options: EpochServiceOptions): Lifecycle<EpochServiceStatus> {
  const clock = options.clock ?? systemClock;
  const rule = {
    epochMs: options.epochMs ?? DEFAULT_REPLAN_RULE.epochMs,
    minEpochMs: options.minEpochMs ?? DEFAULT_REPLAN_RULE.minEpochMs,
    loadChange: options.loadChange ?? DEFAULT_REPLAN_RULE.loadChange,
  };
  const backendTimeoutMs = options.backendTimeoutMs ?? 10_000;
  const logger = options.logger.child({ module: 'scheduler.epoch' });
  const producer = options.bus.producer();
  const latest = new Map<string, { stats: Stats; atMs: number }>();
  const status: EpochServiceStatus = { state: 'idle', epoch: 0, lastPlanAtMs: undefined, backends: [], warnings: [] };
  let state: EpochState | undefined;
  let loadAtLastPlan = 0;
  let consumer: Consumer | undefined;
  const stopping = new AbortController();
  let loop: Promise<void> | undefined;

  /** Lines that anyone who can write to the stats topic could repeat at will: said once, then counted. */
  const repeated = createLogThrottle(LOG_INTERVAL_MS);
  /** When each of the backends named lately registered. */
  let namedAtMs: number[] = [];

  /** A new backend is named, up to NAMED_REGISTRATIONS in an interval; made-up ids past those are counted. */
  const registered = (stats: Stats): void => {
    const now = clock.now();
    namedAtMs = namedAtMs.filter((atMs) => now - atMs < LOG_INTERVAL_MS);
    if (namedAtMs.length < NAMED_REGISTRATIONS) {
      namedAtMs.push(now);
      logger.info({ backend: stats.backend, device: stats.device }, 'backend registered');
    } else {
      // Said, not warned: a scheduler restarted beside a large cluster hears every backend at once.
      repeated.log('registered', (repeats) =>
        logger.info({ backend: stats.backend }, `more than ${NAMED_REGISTRATIONS} backends registered within ${LOG_INTERVAL_MS / 1000} s; the others are counted, not named${repeatedSuffix(repeats, LOG_INTERVAL_MS)}`),
      );
    }
  };

  const onStats = async (batch: Batch): Promise<void> => {
    for (const message of batch.messages) {
      try {
        const stats = Channels.stats.decode(message.value);
        if (!latest.has(stats.backend)) registered(stats);
        // The most recently heard last: past MAX_BACKENDS (ids made up on the stats topic), the one heard from longest ago goes.
        latest.delete(stats.backend);
        latest.set(stats.backend, { stats, atMs: clock.now() });
        for (const oldest of latest.keys()) {
          if (latest.size <= MAX_BACKENDS) break;
          latest.delete(oldest);
        }
      } catch (err) {
        // Stats are a sample: a bad one is skipped (and said), the next second brings another.
        repeated.log('undecodable', (repeats) => logger.warn({ offset: message.offset, err: describeError(err) }, `undecodable stats skipped${repeatedSuffix(repeats, LOG_INTERVAL_MS)}`));
      }
    }
  };

  /** The load the backends reported lately. */
  const demand = (): { apps: AppDemand[]; backends: string[] } => {
    const now = clock.now();
    // A backend silent past the timeout is gone: forgotten, so ids that reported once cannot pile up.
    for (const [backend, { atMs }] of latest) if (now - atMs > backendTimeoutMs) latest.delete(backend);
    const live = [...latest.values()].map((s) => s.stats);
    return { apps: appDemands(options.apps, live), backends: live.map((s) => s.backend).sort() };
  };

  const totalLoad = (apps: readonly AppDemand[]): number => apps.reduce((sum, a) => sum + a.framesRate, 0);

  async function planNow({ apps, backends }: { apps: AppDemand[]; backends: string[] }): Promise<Plan> {
    const result = planEpoch(
      { epoch: status.epoch + 1, nowMs: clock.now(), apps, backends, ...(state ? { previous: state } : {}), ...(options.families ? { families: options.families } : {}) },
      options.profileOf,
      options,
    );
    await producer.send(Channels.plan.topic, [Channels.plan.record(result.plan)]);
    state = result.state;
    loadAtLastPlan = totalLoad(apps);
    Object.assign(status, { epoch: result.plan.epoch, lastPlanAtMs: result.plan.createdAtMs, backends, warnings: result.warnings });
    for (const warning of result.warnings) logger.warn({ epoch: result.plan.epoch }, warning);
    logger.info({ epoch: result.plan.epoch, backends: result.plan.backends.length, sessions: result.plan.sessions.length, load: loadAtLastPlan }, 'plan published');
    return result.plan;
  }

  const due = (apps: readonly AppDemand[]): boolean =>
    status.lastPlanAtMs === undefined || replanDue(clock.now() - status.lastPlanAtMs, totalLoad(apps), loadAtLastPlan, rule);

  async function run(): Promise<void> {
    while (!stopping.signal.aborted) {
      // No plan before a backend reports: an empty one would only displace the one in force.
      const current = demand();
      if (current.backends.length > 0 && due(current.apps)) {
        // A failed plan is retried at the next tick; the last published plan stays in force.
        await planNow(current).catch((err: unknown) => logger.error({ err }, 'planning failed; the previous plan stays'));
      }
      await clock.sleep(1000, stopping.signal).catch(() => undefined);
    }
  }

  return {
    async start() {
      consumer = options.bus.consumer({ groupId: options.groupId ?? Groups.scheduler, topics: [Topics.stats] });
      await consumer.run(onStats);
      status.state = 'running';
      loop = run();
    },
    async drain() {
      status.state = 'draining';
      stopping.abort();
      await loop;
    },
    async close() {
      stopping.abort();
      await loop;
      await consumer?.close();
      await producer.close();
      repeated.close();
      status.state = 'closed';
    },
    status: () => ({ ...status, backends: [...status.backends], warnings: [...status.warnings] }),
  };
}

/**
 * The apps' load from the backends' latest stats: frames per app summed (real-time and
 * delay-tolerant apart), γ per edge averaged. A
 * specialized node (thesis ch. 5) serves only the inputs its oracle ran on, and each template's
 * node those its model ran on (cascade calls, pool rows), as measured over every stream in the
 * last interval. The edges from the node's parents carry those shares of its inputs: into the
 * oracle, the inputs it ran on without a template first (exploring); from a template into the
 * oracle, per run of the template, the inputs its cascade passed on or had checked. Before
 * anything is measured the oracle and each template serve every input, the oracle straight from
 * the parents.
 */
export function appDemands(apps: readonly Omit<AppDemand, 'framesRate' | 'delayTolerantRate' | 'gammas'>[], live: readonly Stats[]): AppDemand[] {
  const framesRate = new Map<string, number>();
  const tolerantRate = new Map<string, number>();
  const gammas = new Map<string, number[]>();
  /** Per app/node: inputs in the interval, runs by the oracle ('') and by each template's model, and the oracle's runs after each template's cascade. */
  const runs = new Map<string, { inputs: number; by: Map<string, number>; after: Map<string, number> }>();
  const add = (counts: Map<string, number>, key: string, n: number) => counts.set(key, (counts.get(key) ?? 0) + n);
  for (const stats of live) {
    for (const a of stats.apps ?? []) {
      // Real-time frames are the load; delay-tolerant ones go into the idle time the plan leaves.
      const tolerant = a.delayTolerantFramesRate ?? 0;
      framesRate.set(a.app, (framesRate.get(a.app) ?? 0) + Math.max(0, a.framesRate - tolerant));
      tolerantRate.set(a.app, (tolerantRate.get(a.app) ?? 0) + tolerant);
    }
    for (const e of stats.edges) {
      const key = `${e.app}/${edgeKey(e.from, e.to)}`;
      gammas.set(key, [...(gammas.get(key) ?? []), e.gamma]);
    }
    for (const s of stats.specializations ?? []) {
      const node = runs.get(`${s.app}/${s.node}`) ?? { inputs: 0, by: new Map<string, number>(), after: new Map<string, number>() };
      node.inputs += s.intervalInputs;
      for (const [model, n] of [['', s.intervalOracleCalls] as const, ...Object.entries(s.intervalTemplateRuns)]) add(node.by, model, n);
      for (const [model, n] of Object.entries(s.intervalCascadeOracleCalls)) add(node.after, model, n);
      runs.set(`${s.app}/${s.node}`, node);
    }
  }
  return apps.map((app) => {
    const modelOf = new Map(app.nodes.map((n) => [n.id, n.model]));
    /**
     * The oracle's runs after a template that the edge from that template carries: at most one per
     * run of the template in the interval (a template's run and its oracle call can fall in two
     * intervals). The rest come in from the parent.
     */
    const carried = (node: string, template: string): number => {
      const served = runs.get(`${app.app}/${node}`);
      const model = modelOf.get(template)!;
      return Math.min(served?.after.get(model) ?? 0, served?.by.get(model) ?? 0);
    };
    const gammasOf = Object.fromEntries(
      app.edges.flatMap((e) => {
        if (specializedNodeOf(e.from) !== undefined) {
          const templateRuns = runs.get(`${app.app}/${e.to}`)?.by.get(modelOf.get(e.from)!) ?? 0;
          return [[edgeKey(e.from, e.to), templateRuns > 0 ? carried(e.to, e.from) / templateRuns : 0]];
        }
        // A template's node is fed what its specialized node is fed; a frame is one input to a root node.
        const node = specializedNodeOf(e.to) ?? e.to;
        const measured = e.from === FRAMES ? [1] : gammas.get(`${app.app}/${edgeKey(e.from, node)}`);
        if (!measured) return [];
        const served = runs.get(`${app.app}/${node}`);
        const runner = node === e.to ? '' : modelOf.get(e.to)!;
        // The oracle's runs after a template come in on that template's edge.
        const afterTemplates = runner === '' ? app.edges.filter((t) => t.to === node && specializedNodeOf(t.from) === node).reduce((n, t) => n + carried(node, t.from), 0) : 0;
        const share = served && served.inputs > 0 ? ((served.by.get(runner) ?? 0) - afterTemplates) / served.inputs : 1;
        return [[edgeKey(e.from, e.to), (share * measured.reduce((a, b) => a + b, 0)) / measured.length]];
      }),
    );
    return { ...app, framesRate: framesRate.get(app.app) ?? 0, delayTolerantRate: tolerantRate.get(app.app) ?? 0, gammas: gammasOf };
  });
}
