import type { NodeOutput } from '../../core/index.js';
import type { Executed, ModelRunner, Prepared, StagedItem, StagedModel } from '../models/index.js';
import type { ExecutableSession } from './executor.js';
import type { Request } from './hosting.js';
import type { LatencyEstimate } from './latency-estimate.js';
import type { Queued } from './session-queue.js';

/** A step's batch: the stage it runs and each request's rows. */
interface Step extends Prepared, Executed {
  stage: number;
  items: StagedItem[];
}

/**
 * Turns a hosting session into one that runs its model in stages (group-wise execution,
 * staged-queue.ts): a request is prepared alone when it starts, carries its rows from stage to
 * stage, and is answered after the last. h_k(b) is the stage's share of the session's ℓ(b),
 * read when asked, so a plan's new profile applies at once; the longest stage's steps teach the
 * model's learned ℓ(b) what the whole model would have taken.
 */
export function stageSession<Session extends ExecutableSession<Request, Prepared, Executed>>(
  session: Session,
  runner: ModelRunner,
  staged: StagedModel,
  options: {
    estimate: LatencyEstimate;
    /** The runtime's workers: the first run of a stage on each is not counted. */
    lanes: number;
    paramsOf: (request: Queued<Request>) => unknown;
    /** Settles a batch's requests: rejected with `error` when `executed` is missing, else resolved with `outputsOf()`. */
    answer: (requests: readonly Queued<Request>[], executed: Executed | undefined, error: unknown, outputsOf: () => Promise<NodeOutput[]>) => Promise<void>;
  },
): Session {
  const items = new WeakMap<Queued<Request>, StagedItem>();
  const last = staged.stages - 1;
  session.stageLatency = {
    stages: staged.stages,
    get maxBatch() {
      return session.targetBatch;
    },
    latencyMs: (stage, batch) => staged.shares[stage]! * session.latency(batch),
  };
  session.prepare = async (requests, stage): Promise<Step> => {
    if (stage === 0) {
      await Promise.all(requests.map(async (r) => items.set(r, staged.begin(await runner.prepare([r.item.image], [options.paramsOf(r)], [r.item.stream])))));
    }
    return { size: requests.length, stage, items: requests.map((r) => items.get(r)!) };
  };
  // The model's learned ℓ(b) hears from its longest stage only (the steadiest share of the whole),
  // after each runtime worker's first run of it, which plans and allocates.
  const longest = staged.shares.indexOf(Math.max(...staged.shares));
  let firstRuns = options.lanes;
  session.execute = async (prepared) => {
    const step = prepared as Step;
    const started = performance.now();
    await staged.run(step.stage, step.items);
    if (step.stage === longest && firstRuns-- <= 0) options.estimate.observe(step.size, (performance.now() - started) / staged.shares[longest]!);
    return step;
  };
  session.finish = async (requests, executed, error, stage) => {
    if (executed && stage < last) return;
    await options.answer(requests, executed, error, async () => Promise.all(requests.map(async (r) => staged.end(items.get(r)!))));
  };
  return session;
}
