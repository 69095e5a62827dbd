import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeError, type AnsweredBy } from '../../core/index.js';
import { topClasses } from '../models/index.js';
import { encodeDenseHead, HEAD_INPUT, HEAD_OUTPUT } from '../onnx/index.js';
import type { LoadedModel, ModelRuntime } from '../runtime/index.js';
import type { HeadJob, TrainedHead } from '../training/index.js';
import { trainingSet, type LabelledPool } from './pool.js';
import { createWeg, type Template, type WegParams, type WegStatus } from './weg.js';

/**
 * One stream's specialized classifier at one DAG node: WEG (Algorithm 5.1) deciding, per input,
 * between the oracle and the cascade (the specialized model h_D, falling through to the oracle
 * on "other"), with h_D's top layer retrained on the template's pre-forwarded pool in the
 * training thread and served by onnxruntime.
 */

/** A template h_k: a cheap network's feature layers, its pool pre-forwarded through them, and how it behaves once specialized. */
export interface SpecializerTemplate<Input> extends Template {
  pool: LabelledPool;
  /** Row-major [inputs, pool.featureCount]. */
  features(inputs: readonly Input[]): Promise<Float32Array>;
}

export interface SpecializerOptions<Input> {
  /** The oracle h*: the label of each input. */
  oracle: (inputs: readonly Input[]) => Promise<string[]>;
  /** Cheapest first. */
  templates: readonly SpecializerTemplate<Input>[];
  weg: WegParams;
  /** Training skew (thesis: 0.5 faces, 0.6 objects) and the most rows a retraining reads. */
  training: { skew: number; maxRows: number };
  train: (job: HeadJob) => Promise<TrainedHead>;
  runtime: ModelRuntime;
  /** Where trained heads are written for onnxruntime to load. */
  headDir: string;
  name: string;
  random?: () => number;
  /**
   * Weigh cost as well as accuracy (weg.ts): a template's cost per input as a share of the
   * oracle's. `measured`: by the model times of the calls here, only where inputs are classified
   * one at a time (in a pipeline a call's time is mostly its wait in the queue); or given from
   * outside (a pipeline's: the models' batch times), undefined while not known.
   * @defaultValue cost not weighed
   */
  relativeCost?: 'measured' | ((template: string) => number | undefined);
  /**
   * Wait for a retraining before the next input, for figures that do not depend on how busy the
   * machine is; the head still starts serving at the stream time the training took.
   */
  awaitTraining?: boolean;
}

export interface Classified {
  label: string;
  answeredBy: AnsweredBy;
  /** h_D's probability of `label` where the cascade answered itself. */
  score?: number;
  /** Time in models for this input: oracle, template and head, spot check included. */
  modelMs: number;
}

export interface SpecializerStatus extends WegStatus<string> {
  /** Inputs the oracle ran on: exploring, spot checks and fall-throughs. */
  oracleCalls: number;
  /** Of those, the inputs a template's cascade ran on first (fall-throughs and spot checks), by template. */
  cascadeOracleCalls: Record<string, number>;
  /** Spot checks the oracle failed to make (its request dropped for its deadline): the cascade's answer stood unchecked. */
  spotChecksMissed: number;
  retrains: number;
  retrainMs: number;
  /** The TensorFlow.js backend of the last retraining. */
  trainedOn?: string;
  /** Why the last failed retraining failed (WEG went back to exploring). */
  trainingError?: string;
}

export interface Specializer<Input> {
  /** `timeMs`: the input's time in the stream (its capture time). One call at a time: a stream's inputs in order. */
  classify(input: Input, timeMs: number): Promise<Classified>;
  /**
   * Inputs of the stream that came together, in order: WEG decides for each at once, their models
   * run at the same time (so their sessions batch them), and WEG hears the outcomes in order. An
   * input whose model failed (its request dropped for its deadline) is rejected alone. One call
   * at a time.
   */
  classifyAll(inputs: readonly { input: Input; timeMs: number }[]): Promise<PromiseSettledResult<Classified>[]>;
  status(): SpecializerStatus;
  close(): Promise<void>;
}

/** What WEG hears of an input, in the group's order: `seen` inputs up to this one; `afterExit`, whether WEG left at an earlier one. Returns whether WEG leaves the specialized phase here. */
type Report = (seen: number, timeMs: number, afterExit: boolean) => boolean;

interface Training<Input> {
  template: SpecializerTemplate<Input>;
  dominant: string[];
  done: Promise<void>;
  head?: { model: LoadedModel; readyAtMs: number };
  /** Why it failed. */
  failed?: string;
}

/** The weight of a call's time in the moving mean of its model's. */
const COST_SMOOTHING = 0.1;

export function createSpecializer<Input>(options: SpecializerOptions<Input>): Specializer<Input> {
  const random = options.random ?? Math.random;
  /**
   * Model time per call (a moving mean) where cost is weighed: the oracle's, and each template's
   * (features and head, a fresh head's first run left out: it plans and allocates).
   */
  let oracleMs: number | undefined;
  const templateMs = new Map<string, number>();
  const movingMean = (mean: number | undefined, ms: number): number => (mean === undefined ? ms : mean + COST_SMOOTHING * (ms - mean));
  const measuredCost = (template: Template): number | undefined => {
    const own = templateMs.get(template.name);
    return own === undefined || !oracleMs ? undefined : own / oracleMs;
  };
  const given = options.relativeCost;
  const relativeCost = given === 'measured' ? measuredCost : given && ((template: Template) => given(template.name));
  const weg = createWeg<string>({ ...options.weg, ...(relativeCost && { relativeCost }) }, options.templates, random);
  let training: Training<Input> | undefined;
  let active: { template: SpecializerTemplate<Input>; dominant: string[]; model: LoadedModel; ran?: boolean } | undefined;
  /** After a failed retraining, WEG's next decisions are refused for this many inputs (w_min, doubling while retraining keeps failing). */
  const backoff = { failures: 0, untilInput: 0, inputs: 0 };
  const trained = { retrains: 0, retrainMs: 0, trainedOn: undefined as string | undefined, trainingError: undefined as string | undefined };
  let oracleCalls = 0;
  const cascadeOracleCalls = new Map<string, number>();
  let spotChecksMissed = 0;

  const timed = async <T>(work: () => Promise<T>): Promise<[T, number]> => {
    const started = performance.now();
    const result = await work();
    return [result, performance.now() - started];
  };
  /** The oracle's label; `after`, the template whose cascade ran on the input first. */
  const oracle = async (input: Input, after?: SpecializerTemplate<Input>): Promise<[string, number]> => {
    oracleCalls += 1;
    if (after) cascadeOracleCalls.set(after.name, (cascadeOracleCalls.get(after.name) ?? 0) + 1);
    const [[label], ms] = await timed(() => options.oracle([input]));
    oracleMs = movingMean(oracleMs, ms);
    if (typeof label !== 'string') throw new TypeError(`specializer ${options.name}: the oracle gave no label for an input`);
    return [label, ms];
  };

  const startTraining = (template: SpecializerTemplate<Input>, wanted: string[], timeMs: number): void => {
    // Classes the pool has no rows of cannot be learnt: the cascade passes them to the oracle.
    const inPool = new Set(template.pool.labels);
    const dominant = wanted.filter((label) => inPool.has(label));
    const t: Training<Input> = { template, dominant, done: Promise.resolve() };
    t.done = (async () => {
      try {
        if (dominant.length === 0) throw new Error(`the template's pool has no rows of ${wanted.join(', ')}`);
        const job = trainingSet(template.pool, dominant, { ...options.training, random });
        const head = await options.train({ ...job, featureCount: template.pool.featureCount });
        const id = `${options.name}-head-${randomUUID()}`;
        const file = join(options.headDir, `${id}.onnx`);
        writeFileSync(file, encodeDenseHead(head));
        try {
          const model = await options.runtime.load({ name: id, file });
          t.head = { model, readyAtMs: timeMs + head.trainMs };
        } finally {
          rmSync(file, { force: true });
        }
        trained.retrains += 1;
        trained.retrainMs += head.trainMs;
        trained.trainedOn = head.backend;
        backoff.failures = 0;
      } catch (err) {
        t.failed = describeError(err);
      }
    })();
    training = t;
  };

  /** A finished training takes over once the stream has reached the time it ended. */
  const settleTraining = async (timeMs: number): Promise<void> => {
    if (!training) return;
    if (options.awaitTraining) await training.done;
    if (training.failed !== undefined) {
      trained.trainingError = training.failed;
      backoff.failures += 1;
      backoff.untilInput = backoff.inputs + (options.weg.minWindow ?? 30) * 2 ** (backoff.failures - 1);
      training = undefined;
      weg.trainingFailed();
    } else if (training.head && timeMs >= training.head.readyAtMs) {
      const { template, dominant, head } = training;
      const previous = active;
      training = undefined;
      active = { template, dominant, model: head.model };
      weg.trained(template, dominant);
      await disposeHead(previous);
    }
  };

  /**
   * The cascade on one input: h_D, and the oracle where h_D says "other" or a spot check is due.
   * What WEG is to hear comes back with the answer: told whether WEG left at an input before it
   * in the group, it says whether WEG leaves now.
   */
  const cascade = async (input: Input, spotCheck: boolean, head: NonNullable<typeof active>): Promise<[Classified, Report]> => {
    const { template, dominant, model } = head;
    const [features, featureMs] = await timed(() => template.features([input]));
    // A copy the model's thread may take over: the template's array may be a view of memory it keeps.
    const feed = { data: features.slice(), dims: [1, features.length], type: 'float32' as const };
    const [outputs, headMs] = await timed(() => model.run({ [HEAD_INPUT]: feed }));
    const { index: best, score } = topClasses(outputs[HEAD_OUTPUT]!.data as Float32Array, 1, dominant)[0]!;
    let modelMs = featureMs + headMs;
    if (head.ran) templateMs.set(template.name, movingMean(templateMs.get(template.name), modelMs));
    head.ran = true;
    let result: Classified;
    let oracleLabel: string | undefined;
    if (best === dominant.length) {
      const [label, ms] = await oracle(input, template);
      modelMs += ms;
      oracleLabel = label;
      result = { label, answeredBy: 'fall-through', modelMs };
    } else {
      if (spotCheck) {
        // The answer stands without its check: an oracle that could not check it in time (its
        // request dropped for the deadline) or at all must not lose the input.
        try {
          const [label, ms] = await oracle(input, template);
          modelMs += ms;
          oracleLabel = label;
        } catch {
          spotChecksMissed += 1;
        }
      }
      result = { label: dominant[best]!, answeredBy: 'cascade', score, modelMs };
    }
    const report: Report = (seen, timeMs, afterExit) => {
      const exits = weg.exploited({ answeredItself: result.answeredBy === 'cascade', answer: result.label, ...(oracleLabel !== undefined ? { oracleLabel } : {}) }) === 'exit';
      // WEG already left the specialized phase: the oracle's label, where there is one, opens the new window.
      if (afterExit && oracleLabel !== undefined) hear(oracleLabel, seen, timeMs);
      return exits;
    };
    return [result, report];
  };
  /** An oracle label for WEG's window; a decision to specialize starts a training, unless failed retrainings hold it back. `seen`: inputs seen up to this one. */
  const hear = (label: string, seen: number, timeMs: number): void => {
    const decision = weg.explored(label);
    if (decision && seen < backoff.untilInput) weg.trainingFailed();
    else if (decision) startTraining(decision.template as SpecializerTemplate<Input>, decision.dominant, timeMs);
  };

  const explore = async (input: Input): Promise<[Classified, Report]> => {
    const [label, modelMs] = await oracle(input);
    return [{ label, answeredBy: 'oracle', modelMs }, (seen, timeMs) => (hear(label, seen, timeMs), false)];
  };

  /** A head the runtime fails to dispose went with its worker: nothing to keep it for. */
  const disposeHead = async (head: typeof active): Promise<void> => {
    await head?.model.dispose().catch(() => undefined);
  };

  let busy = false;
  const classifyAll = async (inputs: readonly { input: Input; timeMs: number }[]): Promise<PromiseSettledResult<Classified>[]> => {
    if (busy) throw new Error(`specializer ${options.name}: classifyAll called while a call is running; a stream's inputs go one call at a time`);
    if (inputs.length === 0) return [];
    busy = true;
    try {
      const before = backoff.inputs;
      backoff.inputs += inputs.length;
      await settleTraining(inputs[0]!.timeMs);
      const head = active;
      const actions = inputs.map(() => weg.next());
      const runs = await Promise.allSettled(
        inputs.map(({ input }, i) => {
          const action = actions[i]!;
          return action.run === 'cascade' && head ? cascade(input, action.spotCheck, head) : explore(input);
        }),
      );
      let exited = false;
      runs.forEach((run, i) => {
        if (run.status === 'fulfilled') exited = run.value[1](before + i + 1, inputs[i]!.timeMs, exited) || exited;
        else weg.abandoned(actions[i]!);
      });
      // The head goes once the inputs that ran on it are done.
      if (exited) {
        if (active === head) active = undefined;
        await disposeHead(head);
      }
      return runs.map((run) => (run.status === 'fulfilled' ? { status: 'fulfilled', value: run.value[0] } : run));
    } finally {
      busy = false;
    }
  };

  return {
    async classify(input, timeMs) {
      const [result] = await classifyAll([{ input, timeMs }]);
      if (result!.status === 'rejected') throw result!.reason;
      return result!.value;
    },
    classifyAll,
    status: () => ({
      ...weg.status(),
      oracleCalls,
      cascadeOracleCalls: Object.fromEntries(cascadeOracleCalls),
      spotChecksMissed,
      retrains: trained.retrains,
      retrainMs: trained.retrainMs,
      ...(trained.trainedOn ? { trainedOn: trained.trainedOn } : {}),
      ...(trained.trainingError ? { trainingError: trained.trainingError } : {}),
    }),
    async close() {
      await training?.done;
      await Promise.all([training?.head?.model.dispose().catch(() => undefined), disposeHead(active)]);
      training = undefined;
      active = undefined;
    },
  };
}
