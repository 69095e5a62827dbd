import type { Logger, NodeOutput, Plan, ResolvedModel } from '../../core/index.js';
import type { ImageInput } from '../image/index.js';
import { blankImage, loadModelRunner, type Executed, type ModelRunner, type Prepared } from '../models/index.js';
import type { FrameCacheStats } from '../cache/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import type { ExecutableSession, Executor } from './executor.js';
import { batchDueMs, DeadlineMissed } from '../dag/index.js';
import type { Queued } from './session-queue.js';
import { createLatencyEstimate, profiledLatency, type LatencyEstimate } from './latency-estimate.js';
import { stageSession } from './staged-session.js';

/** A request waiting in a session's queue, settled when its batch finishes or is dropped. */
export interface Request {
  image: ImageInput;
  /** The model the node names: the session's, or a member of the session's prefix family. */
  model: string;
  params: unknown;
  /** The request's stream (app, node, source), for runners that keep state per stream. */
  stream?: string;
  resolve: (output: NodeOutput) => void;
  reject: (err: unknown) => void;
}

type Session = ExecutableSession<Request, Prepared, Executed> & {
  model: string;
  maxBatch: number;
  /** The model whose requests this session serves as a cheaper variant (MCDNN), when the plan says so; kept while it drains. */
  standsIn?: string;
  /** CPU time per request around its batch, from the plan's profile (0 without one): a batch must end this much before the stage deadline. */
  overheadMs: number;
};

export interface HostingOptions {
  backend: string;
  models: Readonly<Record<string, ResolvedModel>>;
  runtime: ModelRuntime;
  executor: Executor<Request, Prepared, Executed>;
  /** Target batch of a model's own session. */
  batch: (model: string) => number;
  /** Stages each model runs in (group-wise execution, staged-session.ts) where its runner allows; 1: whole. */
  stages: number;
  /** A batch ran: its session and size. */
  onBatch: (session: string, size: number) => void;
  /** The model an app's node names, if this backend runs that app: a plan's session must run it (or a family holding it). */
  modelOf: (app: string, node: string) => string | undefined;
  logger: Logger;
}

export interface Hosting {
  /** Builds one session per model (loaded and warmed up): how a backend runs before any plan. */
  start(models: readonly string[]): Promise<void>;
  /** The session serving an app node's requests: the plan's when hosted here, else the model's own, built on first use. */
  serving(app: string, node: string, model: string): Promise<string>;
  /**
   * Queues a request due at its stage deadline in a session `serving` named; one that left the
   * rotation meanwhile rejoins it, and idles out later.
   */
  enqueue(session: string, request: Queued<Request>): void;
  /**
   * Follows a plan: builds the sessions it gives this backend, then (after `beforeSwitch`, where
   * the backend leaves its consumer group when its routing changed) runs them in the plan's
   * order. Sessions no longer planned serve what they hold and leave.
   */
  follow(plan: Plan, beforeSwitch: () => Promise<void>): Promise<void>;
  runner(model: string): Promise<ModelRunner>;
  /** Models loaded or loading now. */
  models(): string[];
  /** A model's time per input at the batch it ran last, as learned from its batches here; undefined before any. */
  perInputMs(model: string): number | undefined;
  /** The learned caches' figures of the models loaded, per stream. */
  cacheStats(): FrameCacheStats[];
  /** Sessions the plan does not list that sat idle leave; models no session uses are unloaded. */
  unloadIdle(): Promise<void>;
  close(): Promise<void>;
}

/** A warm-up batch is due this long after it is queued. */
const WARM_UP_DUE_MS = 60_000;

/** Under a plan, a session it does not list that took no request for this long leaves the rotation. */
const IDLE_SESSION_MS = 5000;

/**
 * The model sessions one backend hosts. A session is the plan's (`model@slo`, its target batch
 * from the plan, run in the plan's duty-cycle order) or, for a node no plan hosts here (no plan
 * yet, an app the plan has not seen, a frame routed here for another backend's session), the
 * model's own (`model`, the configured batch), so no request waits on a plan. Models load when a
 * session needs them and unload when none does.
 */
export function createHosting(options: HostingOptions): Hosting {
  const logger = options.logger.child({ module: 'analyzers.backend.hosting' });
  const runners = new Map<string, Promise<ModelRunner>>();
  /** The runners loaded, for the figures of their learned caches. */
  const ready = new Map<string, ModelRunner>();
  /** ℓ(b) per model, learned from its batches: a property of the model, shared by its sessions. */
  const estimates = new Map<string, LatencyEstimate>();
  /**
   * Runs of each model so far, counted up to the runtime's lanes: each worker's first run of a
   * model plans and allocates, and would skew ℓ(b).
   */
  const firstRuns = new Map<string, number>();
  const lanes = options.runtime.lanes;
  const built = new Map<string, { model: string; ready: Promise<Session>; session?: Session }>();
  /** The sessions the executor runs, in order: the plan's first, then others that took requests. */
  let rotation: Session[] = [];
  /** The plan's sessions here, and `app/node` → the one serving it; undefined before the first plan. */
  let plan: { sessions: Set<Session>; hosted: Map<string, string> } | undefined;
  const lastUsed = new Map<Session, number>();
  /** While a plan is being followed its sessions are built but not yet in the rotation: nothing unloads. */
  let switching = false;

  const runnerOf = (model: string): Promise<ModelRunner> => {
    let runner = runners.get(model);
    if (!runner) {
      const spec = options.models[model];
      runner = spec ? loadModelRunner(spec, options.runtime, logger) : Promise.reject(new Error(`model ${model} is not in this deployment's zoo`));
      runners.set(model, runner);
      runner.then(
        (loaded) => runners.get(model) === runner && ready.set(model, loaded),
        () => runners.delete(model),
      );
    }
    return runner;
  };

  const build = async (id: string, model: string, batch: number): Promise<Session> => {
    const runner = await runnerOf(model);
    const estimate = estimates.get(model) ?? createLatencyEstimate();
    estimates.set(model, estimate);
    // A family's session tells it which member each request is for; a variant serves its model's requests as its own.
    const paramsOf = (r: Queued<Request>): unknown => (r.item.model === model || r.item.model === session.standsIn ? r.item.params : { member: r.item.model, params: r.item.params });
    const answer = async (requests: readonly Queued<Request>[], executed: Executed | undefined, error: unknown, outputsOf: () => NodeOutput[] | Promise<NodeOutput[]>): Promise<void> => {
      const work = requests.filter((r) => !r.warmUp).length;
      if (executed && work > 0) options.onBatch(id, work);
      let outputs: NodeOutput[];
      try {
        if (!executed) throw error;
        outputs = await outputsOf();
      } catch (err) {
        for (const r of requests) r.item.reject(err);
        return;
      }
      // A variant's answers say which model made them (rows record it).
      requests.forEach((r, i) => r.item.resolve(r.item.model === session.standsIn ? { ...outputs[i]!, servedBy: model } : outputs[i]!));
    };
    const session: Session = {
      id,
      model,
      maxBatch: runner.spec.maxBatch,
      targetBatch: Math.min(batch, runner.spec.maxBatch),
      latency: estimate.latency,
      measuredLatency: estimate.latency,
      overheadMs: 0,
      prepare: (requests) => runner.prepare(requests.map((r) => r.item.image), requests.map(paramsOf), requests.map((r) => r.item.stream)),
      async execute(prepared) {
        const started = performance.now();
        const executed = await runner.execute(prepared);
        const runs = firstRuns.get(model) ?? 0;
        if (runs >= lanes) estimate.observe(prepared.size, performance.now() - started);
        else firstRuns.set(model, runs + 1);
        return executed;
      },
      finish: async (requests, executed, error) => answer(requests, executed, error, () => runner.finish(executed!)),
    };
    if (options.stages > 1 && runner.staged) {
      try {
        return stageSession(session, runner, await runner.staged(options.stages), { estimate, lanes, paramsOf, answer });
      } catch (err) {
        logger.warn({ model, stages: options.stages, err }, 'model not run in stages; it runs whole');
      }
    }
    return session;
  };

  /** The session `id`, built once. */
  const session = (id: string, model: string, batch: number): Promise<Session> => {
    const entry = built.get(id);
    if (entry) return entry.ready;
    const created: { model: string; ready: Promise<Session>; session?: Session } = { model, ready: build(id, model, batch) };
    built.set(id, created);
    created.ready.then((s) => (created.session = s)).catch(() => built.delete(id));
    return created.ready;
  };

  const setRotation = (sessions: Session[]): void => {
    rotation = sessions;
    options.executor.setSessions(sessions);
  };

  /**
   * Blank batches through the executor (so they never take a lane from another batch): one for
   * each of the runtime's workers, whose first run of a model is slow, and one more that gives
   * ℓ(B) for early drop before the first request.
   */
  const warmUp = async (sessions: readonly Session[]): Promise<void> => {
    const cold = [...new Map(sessions.map((s) => [s.model, s])).values()].filter((s) => estimates.get(s.model)?.latency(s.targetBatch) === 0);
    const blanks = await Promise.all(
      cold.map(async (s) => {
        const params = (await runnerOf(s.model)).parseParams({});
        const image = blankImage();
        return Array.from({ length: (lanes + 1) * s.targetBatch }, () =>
          new Promise<void>((resolve, reject) =>
            // Due in a minute: real-time work, so plan-ahead never holds it (following a plan waits for it).
            // Dropped that late, it measured nothing and harms nothing.
            options.executor.submit(s.id, {
              deadlineMs: Date.now() + WARM_UP_DUE_MS,
              warmUp: true,
              item: { image, model: s.model, params, resolve: () => resolve(), reject: (err) => (err instanceof DeadlineMissed ? resolve() : reject(err)) },
            }),
          ),
        );
      }),
    );
    await Promise.all(blanks.flat());
  };

  const switchTo = async (next: Plan, beforeSwitch: () => Promise<void>): Promise<void> => {
    const mine = next.backends.find((b) => b.backend === options.backend)?.sessions ?? [];
    const planned: Session[] = [];
    const hosted = new Map<string, string>();
    for (const { session: id, batch } of mine) {
      const spec = next.sessions.find((s) => s.id === id);
      try {
        if (!spec) throw new Error('the plan lists it for this backend but does not define it');
        const s = await session(id, spec.model, batch);
        s.targetBatch = Math.min(batch, s.maxBatch);
        // The profile the plan was made with, as the simulator uses it; the learned ℓ(b) until a profile exists.
        s.latency = spec.latencyMs ? profiledLatency(spec.latencyMs) : estimates.get(spec.model)!.latency;
        s.overheadMs = spec.overheadMs ?? 0;
        s.standsIn = spec.variantOf;
        planned.push(s);
      } catch (err) {
        logger.warn({ epoch: next.epoch, session: id, err }, 'planned session not hosted; its requests go to the model session');
        continue;
      }
      for (const n of spec.nodes ?? []) {
        const model = options.modelOf(n.app, n.node);
        const runs = model === undefined || model === spec.model || model === spec.variantOf || (options.models[spec.model]?.family ?? []).some((m) => m.name === model);
        if (runs) hosted.set(`${n.app}/${n.node}`, id);
        else logger.warn({ epoch: next.epoch, session: id, node: `${n.app}/${n.node}` }, `the plan gives ${n.app}/${n.node} (model ${model}) to a session of ${spec.model}; its requests go to the model's own session`);
      }
    }
    await beforeSwitch();
    plan = { sessions: new Set(planned), hosted };
    setRotation(planned);
    await warmUp(planned);
    logger.info({ epoch: next.epoch, sessions: planned.map((s) => `${s.id}:${s.targetBatch}`) }, 'following plan');
  };

  return {
    async start(models) {
      const sessions = await Promise.all([...new Set(models)].map((model) => session(model, model, options.batch(model))));
      setRotation(sessions);
      await warmUp(sessions);
    },
    async serving(app, node, model) {
      const planned = built.get(plan?.hosted.get(`${app}/${node}`) ?? '');
      return (await (planned?.ready ?? session(model, model, options.batch(model)))).id;
    },
    enqueue(id, request) {
      const s = built.get(id)?.session;
      if (!s) throw new Error(`session ${id} is not built here`);
      lastUsed.set(s, Date.now());
      if (!rotation.includes(s)) setRotation([...rotation, s]);
      options.executor.submit(id, { ...request, deadlineMs: batchDueMs(request.deadlineMs, s.overheadMs) });
    },
    follow: async (next, beforeSwitch) => {
      switching = true;
      try {
        await switchTo(next, beforeSwitch);
      } finally {
        switching = false;
      }
    },
    runner: runnerOf,
    models: () => [...runners.keys()].sort(),
    perInputMs: (model) => estimates.get(model)?.perInput(),
    cacheStats: () => [...ready.values()].flatMap((r) => r.cacheStats?.() ?? []),
    async unloadIdle() {
      if (switching || !plan) return;
      const now = Date.now();
      const inForce = plan.sessions;
      const idle = rotation.filter((s) => !inForce.has(s) && now - (lastUsed.get(s) ?? 0) > IDLE_SESSION_MS);
      if (idle.length > 0) setRotation(rotation.filter((s) => !idle.includes(s)));
      const inUse = options.executor.inUse();
      for (const [id, entry] of built) {
        if (entry.session && !rotation.includes(entry.session) && !inUse.has(id)) {
          built.delete(id);
          lastUsed.delete(entry.session);
        }
      }
      // Chosen and forgotten before the first await, so a session built meanwhile loads its model afresh.
      const needed = new Set([...built.values()].map((entry) => entry.model));
      const unused = [...runners].filter(([model]) => !needed.has(model));
      for (const [model] of unused) {
        runners.delete(model);
        ready.delete(model);
        firstRuns.delete(model);
        logger.info({ model }, 'model unloaded: no session uses it');
      }
      await Promise.all(unused.map(async ([, runner]) => (await runner).dispose()));
    },
    async close() {
      const loaded = [...runners.values()];
      runners.clear();
      ready.clear();
      await Promise.all(loaded.map(async (r) => (await r).dispose()));
    },
  };
}
