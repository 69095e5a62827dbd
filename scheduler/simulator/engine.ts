import { batchDueMs, chooseBatch, stageDeadlineMs, type DropPolicy } from '../../analyzers/index.js';
import { ErrorCode, PanoptesError } from '../../core/index.js';
import { replanDue } from '../epoch.js';
import type { ModelProfile, ProfileLookup } from '../profile.js';
import { repack } from '../repack.js';
import type { GpuNode } from '../squishy.js';
import { EPSILON, peakThroughput } from '../worst-case.js';
import { arrivalStream, type ArrivalSpec, type ArrivalStream } from './arrivals.js';
import { EventQueue } from './event-queue.js';
import { seededRandom, streamSeed } from './random.js';
import { RequestQueue } from './request-queue.js';
import { RateMeter, replanSettings, type ReplanOptions, type ReplanSettings } from './replanning.js';
import { WeightedRoundRobin } from './routing.js';

/**
 * A discrete-event simulation of the Nexus data plane driven by a plan from the scheduler's own
 * functions: requests arrive at sessions, are routed to the nodes serving them in proportion to
 * the rate each node serves, wait in a deadline-ordered queue per (node, session), and each
 * node runs its sessions round-robin in the plan's order, one batch at a time, exclusively,
 * without waiting for a batch to fill (§6.3). A batch takes ℓ(b) from the profile, exactly:
 * the simulation has no noise of its own besides the arrivals, so early drop's promise (a batch
 * it starts finishes in time) holds exactly. With `replan`, the control plane measures rates
 * and calls `repack` at the epoch rule's moments.
 *
 * Every request ends in exactly one of three counts: good (its batch finished by its deadline),
 * late, or dropped. A request's stage deadline is its arrival at the app plus the SLOs of the
 * stages up to and including its own (so a detector's batch must leave the recognizers their
 * share); its batch must end by that less its profile's CPU pre/post-processing time. The
 * backend derives its deadlines with the same functions (`stageDeadlineMs`, `batchDueMs`).
 */

export interface SimSession {
  id: string;
  model: string;
  /** The latency SLO of this stage, ms, as the plan was made for it. */
  sloMs: number;
  /** Requests entering the app here (frames); a stage fed only by its parent has none. */
  arrivals?: ArrivalSpec;
  /** Edges of the app's model tree: each request this session serves makes `gamma` requests of `session` on average. */
  children?: readonly { session: string; gamma: number }[];
}

export interface SimulationConfig {
  sessions: readonly SimSession[];
  profileOf: ProfileLookup;
  /** The nodes at the start: sessions with their batch, duty-cycle order and the rate each node serves. */
  plan: readonly GpuNode[];
  drop: DropPolicy;
  /** Arrivals stop here; what is still queued is then served or dropped, so every request is accounted. */
  durationMs: number;
  seed: number;
  /** Re-plan with `repack` on measured rates, by the epoch rule. Without it the plan is fixed. */
  replan?: ReplanOptions;
  /** Called for every batch a node runs (instrumentation and tests). */
  onBatch?: (batch: BatchRecord) => void;
}

export interface BatchRecord {
  node: string;
  session: string;
  startMs: number;
  endMs: number;
  size: number;
}

/** Every request ends in exactly one of good, late and dropped. */
export interface Counts {
  /** Requests: entering from outside, or made by a parent stage. */
  requests: number;
  /** Its batch finished by its deadline. */
  good: number;
  late: number;
  dropped: number;
}

export interface SimulationResult extends Counts {
  /** (late + dropped) / requests. */
  badRate: number;
  /** Requests served (good or late) per second of the run. */
  throughput: number;
  /** Good requests per second of the run. */
  goodput: number;
  /** GPUs in the plan, averaged over the run. */
  gpus: number;
  /** Each plan in force: from when, and its GPUs. The first is the given plan at 0 ms. */
  plans: { atMs: number; gpus: number }[];
  /** The same counts per session. */
  bySession: Record<string, Counts>;
  /** Per second of the run: requests that arrived, and requests dropped or finished late (the last second also holds the drain). */
  perSecond: { requests: number; bad: number }[];
}

interface Request {
  session: number;
  /** When the app request it belongs to arrived (a frame's capture time), ms. */
  arrivalMs: number;
  /** The SLOs of the stages from the app's entry down to and including this one, ms. */
  budgetUpToMs: number;
  /** When its batch must finish on the GPU, ms: its stage deadline less the CPU time. */
  dueMs: number;
}

interface SessionState {
  spec: SimSession;
  profile: ModelProfile;
  children: { session: number; gamma: number }[];
  /** T at this SLO, for the load in GPUs the epoch rule watches; 0 when no batch meets the SLO. */
  peakThroughput: number;
  router: WeightedRoundRobin<NodeState>;
}

interface Slot {
  session: number;
  batch: number;
  queue: RequestQueue<Request>;
}

interface NodeState {
  id: string;
  slots: Slot[];
  /** The slot whose turn is next (round-robin in the plan's order). */
  turn: number;
  busy: boolean;
  /** Left out of the current plan: it finishes its batch and runs no more. */
  retired: boolean;
}

type SimEvent =
  | { kind: 'arrival'; session: number; stream: ArrivalStream }
  | { kind: 'enter'; request: Request }
  | { kind: 'done'; node: NodeState; slot: Slot; batch: Request[] }
  | { kind: 'beacon' };

export function runSimulation(config: SimulationConfig): SimulationResult {
  return new Simulation(config).run();
}

class Simulation {
  readonly #config: SimulationConfig;
  readonly #sessions: SessionState[];
  readonly #indexOf: Map<string, number>;
  readonly #events = new EventQueue<SimEvent>();
  readonly #fanOut: () => number;
  readonly #settings: ReplanSettings | undefined;
  readonly #meter: RateMeter | undefined;
  #nodes: NodeState[] = [];
  /** Nodes the plan released that may still be finishing a batch: the same GPU if a later plan takes its id again. */
  readonly #released = new Map<string, NodeState>();
  #plan: GpuNode[] = [];
  #planAtMs = 0;
  #plannedLoad = 0;
  #gpuMs = 0;
  readonly #plans: SimulationResult['plans'] = [];
  readonly #bySession: Counts[];
  readonly #perSecond: SimulationResult['perSecond'];

  constructor(config: SimulationConfig) {
    this.#config = config;
    this.#indexOf = new Map(config.sessions.map((s, i) => [s.id, i]));
    if (this.#indexOf.size !== config.sessions.length) throw inputError('session ids must be unique', {});
    this.#sessions = config.sessions.map((spec) => this.#sessionState(spec));
    this.#sessions.forEach((_, i) => this.#assertAcyclic(i, new Set()));
    this.#fanOut = seededRandom(streamSeed(config.seed, config.sessions.length));
    this.#settings = config.replan && replanSettings(config.replan);
    this.#meter = this.#settings && new RateMeter(config.sessions.length, this.#settings);
    this.#bySession = config.sessions.map(() => ({ requests: 0, good: 0, late: 0, dropped: 0 }));
    this.#perSecond = Array.from({ length: Math.max(1, Math.ceil(config.durationMs / 1000)) }, () => ({ requests: 0, bad: 0 }));
  }

  run(): SimulationResult {
    const config = this.#config;
    this.#install(config.plan, 0);
    if (this.#settings) {
      const planned = config.sessions.map(() => 0);
      for (const s of config.plan.flatMap((n) => n.sessions)) {
        const i = this.#indexOf.get(s.id) as number; // #install checked every id
        planned[i] = (planned[i] ?? 0) + s.rate;
      }
      this.#plannedLoad = this.#load(planned);
    }
    config.sessions.forEach((spec, session) => {
      if (!spec.arrivals) return;
      const stream = arrivalStream(spec.arrivals, streamSeed(config.seed, session));
      this.#nextArrival(session, stream);
    });
    if (this.#settings) this.#events.push(this.#settings.beaconMs, { kind: 'beacon' });

    for (let next = this.#events.pop(); next; next = this.#events.pop()) {
      const { timeMs: now, event } = next;
      switch (event.kind) {
        case 'arrival':
          this.#admit(this.#newRequest(event.session, now, 0), now);
          this.#nextArrival(event.session, event.stream);
          break;
        case 'enter':
          this.#admit(event.request, now);
          break;
        case 'done':
          this.#finish(event.node, event.slot, event.batch, now);
          break;
        case 'beacon':
          this.#beacon(now);
          break;
      }
    }
    this.#gpuMs += this.#plan.length * Math.max(0, config.durationMs - this.#planAtMs);

    const total = (what: keyof Counts): number => this.#bySession.reduce((sum, c) => sum + c[what], 0);
    const [requests, good, late, dropped] = [total('requests'), total('good'), total('late'), total('dropped')];
    const seconds = config.durationMs / 1000;
    return {
      requests,
      good,
      late,
      dropped,
      badRate: requests === 0 ? 0 : (late + dropped) / requests,
      throughput: (good + late) / seconds,
      goodput: good / seconds,
      gpus: this.#gpuMs / config.durationMs,
      plans: this.#plans,
      bySession: Object.fromEntries(config.sessions.map((spec, i) => [spec.id, this.#bySession[i] as Counts])),
      perSecond: this.#perSecond,
    };
  }

  #sessionState(spec: SimSession): SessionState {
    const profile = this.#config.profileOf(spec.model);
    const children = (spec.children ?? []).map((edge) => {
      const session = this.#indexOf.get(edge.session);
      if (session === undefined) throw inputError(`session "${spec.id}" feeds unknown session "${edge.session}"`, { session: spec.id });
      if (!(edge.gamma >= 0)) throw inputError(`session "${spec.id}" → "${edge.session}" has fan-out ${edge.gamma}`, { session: spec.id });
      return { session, gamma: edge.gamma };
    });
    const peak = peakThroughput(profile, spec.sloMs, this.#config.replan?.deviceMemoryMB ?? Infinity);
    return { spec, profile, children, peakThroughput: peak?.throughput ?? 0, router: new WeightedRoundRobin([]) };
  }

  #assertAcyclic(session: number, path: Set<number>): void {
    if (path.has(session)) throw inputError('the sessions\' children form a cycle', { session: this.#config.sessions[session]?.id });
    path.add(session);
    for (const c of (this.#sessions[session] as SessionState).children) this.#assertAcyclic(c.session, path);
    path.delete(session);
  }

  /** A request of `session` for an app request that arrived at `arrivalMs`, its parent stages' SLOs summing to `parentBudgetMs`. */
  #newRequest(session: number, arrivalMs: number, parentBudgetMs: number): Request {
    const s = this.#sessions[session] as SessionState;
    const budgetUpToMs = parentBudgetMs + s.spec.sloMs;
    return { session, arrivalMs, budgetUpToMs, dueMs: batchDueMs(stageDeadlineMs(arrivalMs, budgetUpToMs), s.profile.overheadMs) };
  }

  #nextArrival(session: number, stream: ArrivalStream): void {
    const at = stream();
    if (at < this.#config.durationMs) this.#events.push(at, { kind: 'arrival', session, stream });
  }

  /** A request reaches its session: counted, routed, queued; an idle node starts on it. */
  #admit(request: Request, now: number): void {
    this.#tally(request.session, 'requests', now);
    this.#meter?.count(request.session);
    this.#route(request, now);
  }

  #route(request: Request, now: number): void {
    const node = (this.#sessions[request.session] as SessionState).router.next();
    const slot = node?.slots.find((s) => s.session === request.session);
    if (!node || !slot) return this.#drop(request, now);
    slot.queue.push(request);
    if (!node.busy) this.#startNext(node, now);
  }

  /** The node's next turn: the first session in round-robin order with a batch to run. */
  #startNext(node: NodeState, now: number): void {
    if (node.retired) return;
    const count = node.slots.length;
    for (let k = 0; k < count; k++) {
      const index = (node.turn + k) % count;
      const slot = node.slots[index] as Slot;
      const { queue } = slot;
      if (queue.length === 0) continue;
      const session = this.#sessions[slot.session] as SessionState;
      const { profile } = session;
      const choice = chooseBatch(this.#config.drop, (i) => (queue.items[i] as Request).dueMs, queue.head, queue.items.length, now, slot.batch, profile.latency);
      for (const request of queue.take(choice.start - queue.head)) this.#drop(request, now);
      if (choice.size === 0) continue;
      const batch = queue.take(choice.size);
      const endMs = now + profile.latency(batch.length);
      node.busy = true;
      node.turn = (index + 1) % count;
      this.#config.onBatch?.({ node: node.id, session: session.spec.id, startMs: now, endMs, size: batch.length });
      this.#events.push(endMs, { kind: 'done', node, slot, batch });
      return;
    }
  }

  #finish(node: NodeState, slot: Slot, batch: readonly Request[], now: number): void {
    const session = this.#sessions[slot.session] as SessionState;
    for (const request of batch) {
      this.#tally(slot.session, now <= request.dueMs + EPSILON ? 'good' : 'late', now);
      // Children leave after the parent's post-processing, with what is left of the deadline.
      for (const child of this.#draw(session)) {
        this.#events.push(now + session.profile.overheadMs, { kind: 'enter', request: this.#newRequest(child, request.arrivalMs, request.budgetUpToMs) });
      }
    }
    node.busy = false;
    this.#startNext(node, now);
  }

  /** A dropped request's children never get their input: they are dropped with it, so an app request always counts 1 + Σγ requests. */
  #drop(request: Request, now: number): void {
    this.#tally(request.session, 'dropped', now);
    for (const child of this.#draw(this.#sessions[request.session] as SessionState)) {
      this.#tally(child, 'requests', now);
      this.#drop(this.#newRequest(child, request.arrivalMs, request.budgetUpToMs), now);
    }
  }

  /** The children one served request makes: ⌊γ⌋ of each child session, plus one more with probability γ − ⌊γ⌋. */
  #draw(session: SessionState): number[] {
    const made: number[] = [];
    for (const { session: child, gamma } of session.children) {
      const count = Math.floor(gamma) + (this.#fanOut() < gamma - Math.floor(gamma) ? 1 : 0);
      for (let i = 0; i < count; i++) made.push(child);
    }
    return made;
  }

  #beacon(now: number): void {
    const settings = this.#settings as ReplanSettings;
    const rates = (this.#meter as RateMeter).beacon();
    const load = this.#load(rates);
    if (replanDue(now - this.#planAtMs, load, this.#plannedLoad, settings)) {
      const sessions = this.#config.sessions.map((s, i) => ({ id: s.id, model: s.model, sloMs: s.sloMs, rate: rates[i] ?? 0 }));
      this.#install(repack(this.#plan, sessions, this.#config.profileOf, { deviceMemoryMB: settings.deviceMemoryMB }).nodes, now);
      this.#plannedLoad = load;
    }
    if (now + settings.beaconMs < this.#config.durationMs) this.#events.push(now + settings.beaconMs, { kind: 'beacon' });
  }

  /** Σ R/T over the sessions' rates (by session index): the load in GPUs at peak throughput. */
  #load(rates: readonly number[]): number {
    return this.#sessions.reduce((sum, s, i) => (s.peakThroughput > 0 ? sum + (rates[i] ?? 0) / s.peakThroughput : sum), 0);
  }

  /**
   * Puts a plan in force. A node the plan keeps (by id) keeps its queues for the sessions it
   * still serves; requests queued for a session a node no longer serves, or on a node the plan
   * released, are routed again under the new plan. A busy node finishes its batch either way.
   */
  #install(plan: readonly GpuNode[], now: number): void {
    this.#gpuMs += this.#plan.length * Math.max(0, Math.min(now, this.#config.durationMs) - this.#planAtMs);
    this.#plan = [...plan];
    this.#planAtMs = now;
    this.#plans.push({ atMs: now, gpus: plan.length });

    const previous = new Map(this.#nodes.map((n) => [n.id, n]));
    const known = (id: string): NodeState | undefined => previous.get(id) ?? this.#released.get(id);
    const orphans: Request[] = [];
    const weights = new Map<number, { target: NodeState; weight: number }[]>();
    this.#nodes = plan.map((gpu) => {
      const node = known(gpu.id) ?? { id: gpu.id, slots: [], turn: 0, busy: false, retired: false };
      previous.delete(gpu.id);
      this.#released.delete(gpu.id);
      node.retired = false;
      const queues = new Map(node.slots.map((s) => [s.session, s.queue]));
      node.slots = gpu.sessions.map((s) => {
        const session = this.#indexOf.get(s.id);
        if (session === undefined) throw inputError(`the plan's node ${gpu.id} serves unknown session "${s.id}"`, { node: gpu.id });
        weights.set(session, [...(weights.get(session) ?? []), { target: node, weight: s.rate }]);
        const queue = queues.get(session) ?? new RequestQueue<Request>();
        queues.delete(session);
        return { session, batch: s.batch, queue };
      });
      for (const queue of queues.values()) orphans.push(...queue.take(queue.length));
      node.turn = 0;
      return node;
    });
    for (const node of previous.values()) {
      node.retired = true;
      this.#released.set(node.id, node);
      for (const slot of node.slots) orphans.push(...slot.queue.take(slot.queue.length));
    }
    this.#sessions.forEach((s, i) => (s.router = new WeightedRoundRobin(weights.get(i) ?? [])));
    for (const request of orphans) this.#route(request, now);
    for (const node of this.#nodes) if (!node.busy) this.#startNext(node, now);
  }

  /** Counts one request's arrival or outcome, for its session and for the second it happens in. */
  #tally(session: number, what: keyof Counts, now: number): void {
    (this.#bySession[session] as Counts)[what]++;
    const second = this.#perSecond[Math.min(this.#perSecond.length - 1, Math.floor(now / 1000))] as { requests: number; bad: number };
    if (what === 'requests') second.requests++;
    else if (what !== 'good') second.bad++;
  }
}

const inputError = (message: string, details: Record<string, unknown>): PanoptesError =>
  new PanoptesError(ErrorCode.SchedulerInput, message, { details });
