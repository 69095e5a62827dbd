import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogThrottle, repeatedSuffix, templateNodeId, type AppLogic, type FrameRef, type Logger, type NodeOutput, type SpecializeConfig, type Stats } from '../../core/index.js';
import type { DagNode } from '../dag/index.js';
import type { ImageInput } from '../image/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { createSpecializer, createStreamPool, type Classified, type Specializer, type SpecializerTemplate, type StreamPool } from '../specialize/index.js';
import { createHeadTrainer, type HeadTrainer } from '../training/index.js';

/**
 * The nodes of this backend's apps that declare `specialize:`: one specializer (WEG with its
 * cascade) per stream and node, keyed by source, which the bus keeps on one backend. The oracle
 * is the node's own session and each template runs in a session of its own (`templateNodeId`),
 * both batched with every other stream's requests and planned by the scheduler; a template's
 * feature layer comes out of its classifier's run. The trained heads (one small dense layer per
 * stream) run on the runtime, and one training thread retrains the heads of every stream. Each
 * template's pool is the stream's own inputs as the oracle labelled them (`createStreamPool`).
 * A stream's inputs that come while others run wait, and are then classified together
 * (`classifyAll`): a frame's crops after the first reach the sessions as one batch.
 */

export type SpecializationStats = NonNullable<Stats['specializations']>[number];

export interface SpecializedNodesOptions {
  apps: readonly AppLogic[];
  runtime: ModelRuntime;
  /** Runs one image of `frame`'s stream through a node's session by its deadline. */
  infer(node: DagNode, image: ImageInput, params: unknown, deadlineMs: number, frame: FrameRef): Promise<NodeOutput>;
  /** A model's params, parsed once: a template runs with its defaults. */
  parseParams(model: string, params: Record<string, unknown>): Promise<unknown>;
  /**
   * A model's time per input as it runs now (its batches' time over their size), undefined before
   * any batch: WEG weighs a template's cost by it. A node served by a variant or a family has no
   * time of its own model, and its cost is not weighed.
   */
  latency(model: string): number | undefined;
  logger: Logger;
  random?: () => number;
  /** A stream that sent no input for this long is forgotten (its head, pools and WEG state). @defaultValue 10 minutes */
  idleStreamMs?: number;
}

export interface SpecializedNodes {
  specializes(node: DagNode): boolean;
  /** The templates' models, for their sessions. */
  templates(): string[];
  /**
   * The node's answer for one input of the stream `frame.source`. A stream's inputs are taken in
   * the order they come: those that came while the last ones ran are classified together.
   */
  classify(node: DagNode, image: ImageInput, params: unknown, deadlineMs: number, frame: FrameRef): Promise<NodeOutput>;
  /**
   * Table 5.4's counts per stream and node since this backend began serving the stream, and the
   * oracle's and templates' runs since the last call, for the streams whose counts moved since then (inputs, fall-throughs, oracle calls).
   * Forgets streams idle for `idleStreamMs`.
   */
  stats(): SpecializationStats[];
  close(): Promise<void>;
}

/** The thesis' training skew by workload (§5.4), and the most rows one retraining reads. */
const TRAINING_SKEW = { faces: 0.5, objects: 0.6 } as const;
const MAX_TRAINING_ROWS = 600;

/** A stream's input with its request: the oracle and the templates run it by its deadline, the oracle with its params. */
interface StreamInput {
  image: ImageInput;
  deadlineMs: number;
  params: unknown;
  /** The frame it came from: the models that keep state per stream (identities, caches) key it by its source. */
  frame: FrameRef;
  /** The oracle's whole answer, where it ran. */
  oracle?: NodeOutput;
}

interface Waiting {
  input: StreamInput;
  timeMs: number;
  resolve: (output: NodeOutput) => void;
  reject: (err: unknown) => void;
}

interface Stream {
  node: DagNode;
  source: string;
  specializer: Specializer<StreamInput>;
  pools: { template: DagNode; pool: StreamPool }[];
  /** Inputs waiting for the ones in flight, and whether some are. */
  waiting: Waiting[];
  running: boolean;
  /** Template runs by model, and the counts at the last stats, for the interval's. */
  templateRuns: Map<string, number>;
  reported: { inputs: number; fellThrough: number; oracleCalls: number; templateRuns: Map<string, number>; cascadeOracleCalls: Record<string, number> };
  lastInputMs: number;
}

/** The most inputs of one stream classified together. */
const MAX_GROUP = 16;

export function createSpecializedNodes(options: SpecializedNodesOptions): SpecializedNodes {
  const logger = options.logger.child({ module: 'analyzers.specialize' });
  const random = options.random ?? Math.random;
  const configs = new Map<string, SpecializeConfig>();
  for (const app of options.apps) for (const node of app.spec.nodes) if (node.specialize) configs.set(`${app.spec.name}/${node.id}`, node.specialize);
  const streams = new Map<string, Stream>();
  let trainer: HeadTrainer | undefined;
  let headDir: string | undefined;
  const train = () => (trainer ??= createHeadTrainer());
  const idleStreamMs = options.idleStreamMs ?? 10 * 60_000;
  let closed = false;
  /** Pool rows being added and measurements running, awaited on close. */
  const background = new Set<Promise<unknown>>();
  const inBackground = (work: Promise<unknown>): void => {
    const tracked = work.catch((err: unknown) => logger.error({ err }, 'specialization work failed')).finally(() => background.delete(tracked));
    background.add(tracked);
  };
  /** A template that keeps failing (or a pool that cannot be measured) is said once, then counted. */
  const failures = createLogThrottle(30_000);
  const warn = (key: string, err: unknown, message: string): void =>
    failures.log(key, (repeats) => logger.warn({ err, ...(repeats > 0 ? { repeats } : {}) }, `${message}${repeatedSuffix(repeats, 30_000)}`));

  /** A template runs with its model's default params, parsed once. */
  const templateParams = new Map<string, Promise<unknown>>();
  /** The template's feature layer for an image of the stream, from the template's own session. */
  const features = async (stream: Stream, template: DagNode, { image, frame }: StreamInput, deadlineMs: number): Promise<Float32Array> => {
    stream.templateRuns.set(template.model, (stream.templateRuns.get(template.model) ?? 0) + 1);
    let params = templateParams.get(template.model);
    if (!params) {
      templateParams.set(template.model, (params = options.parseParams(template.model, {})));
      // A model that failed to load is tried again with the next input.
      params.catch(() => templateParams.delete(template.model));
    }
    const output = await options.infer(template, image, await params, deadlineMs, frame);
    if (output.kind !== 'attributes' || !output.features) throw new TypeError(`${template.app}/${template.node}: ${template.model} gave no features; a template needs a \`features\` output`);
    return output.features;
  };

  const streamOf = (node: DagNode, source: string): Stream => {
    const key = `${source}\u0000${node.app}/${node.node}`;
    const existing = streams.get(key);
    if (existing) return existing;
    const config = configs.get(`${node.app}/${node.node}`)!;
    const training = { skew: config.trainingSkew ?? TRAINING_SKEW[config.workload], maxRows: MAX_TRAINING_ROWS };
    const pools = config.templates.map((model) => ({
      template: { app: node.app, node: templateNodeId(node.node, model), model },
      pool: createStreamPool({ rowsPerClass: config.poolRowsPerClass, maxClasses: config.poolClasses, training, random }),
    }));
    const templates: SpecializerTemplate<StreamInput>[] = pools.map(({ template, pool }) => ({
      name: template.model,
      behaviour: (n) => pool.behaviour(n),
      get pool() {
        return pool.pool;
      },
      features: async ([input]) => features(created, template, input!, input!.deadlineMs),
    }));
    const created: Stream = {
      node,
      source,
      pools,
      waiting: [],
      running: false,
      templateRuns: new Map(),
      reported: { inputs: 0, fellThrough: 0, oracleCalls: 0, templateRuns: new Map(), cascadeOracleCalls: {} },
      lastInputMs: Date.now(),
      specializer: createSpecializer<StreamInput>({
        name: `${node.app}-${node.node}`,
        templates,
        weg: config,
        training,
        train: (job) => train().train(job),
        runtime: options.runtime,
        headDir: (headDir ??= mkdtempSync(join(tmpdir(), 'panoptes-heads-'))),
        random,
        // The models' own times, not a call's: in a pipeline a call waits in its session's queue.
        relativeCost: (template) => {
          const [own, oracle] = [options.latency(template), options.latency(node.model)];
          return own === undefined || !oracle ? undefined : own / oracle;
        },
        oracle: async (inputs) =>
          Promise.all(
            inputs.map(async (input) => {
              const output = await options.infer(node, input.image, input.params, input.deadlineMs, input.frame);
              const label = output.kind === 'attributes' ? output.attributes[0]?.value : undefined;
              if (label === undefined) throw new TypeError(`${node.app}/${node.node}: the oracle ${node.model} answered no class (${output.kind})`);
              input.oracle = output;
              return label;
            }),
          ),
      }),
    };
    streams.set(key, created);
    return created;
  };

  /** An input the oracle labelled joins each template's pool where the pool keeps it; one template failing keeps no other from it. */
  const remember = async (stream: Stream, input: StreamInput, label: string): Promise<void> => {
    for (const { template, pool } of stream.pools) {
      const slot = pool.admit(label);
      if (!slot) continue;
      const where = `${template.app}/${template.node}`;
      try {
        // Delay-tolerant: served after the requests that have deadlines, never dropped for time.
        pool.fill(slot, await features(stream, template, input, Infinity));
      } catch (err) {
        warn(`pool ${where}`, err, `${where}: an input could not join the specialization pool`);
        continue;
      }
      inBackground(pool.measureIfDue((job) => train().train(job)).catch((err: unknown) => warn(`measure ${where}`, err, `${where}: measuring the template on the stream's pool failed`)));
    }
  };

  /** The node's output for a classified input; an input the oracle labelled joins the pools, off the answer's path. */
  const outputOf = (stream: Stream, input: StreamInput, result: Classified): NodeOutput => {
    const oracle = input.oracle;
    if (result.answeredBy === 'cascade' || !oracle || oracle.kind !== 'attributes') {
      const name = oracle?.kind === 'attributes' ? oracle.attributes[0]!.name : 'class';
      return { kind: 'attributes', attributes: [{ name, value: result.label, number: 0, score: result.score ?? 0 }], answeredBy: result.answeredBy };
    }
    inBackground(remember(stream, input, result.label));
    // Where the node has a learned cache, it is the oracle's, and says where the oracle's run ended.
    return { kind: 'attributes', attributes: oracle.attributes, answeredBy: result.answeredBy, ...(oracle.exit ? { exit: oracle.exit } : {}) };
  };

  /** Classifies what waits, a group at a time, until nothing does. */
  const drain = async (stream: Stream): Promise<void> => {
    stream.running = true;
    try {
      while (stream.waiting.length > 0) {
        const group = stream.waiting.splice(0, MAX_GROUP);
        try {
          const results = await stream.specializer.classifyAll(group);
          results.forEach((result, i) => {
            const { input, resolve, reject } = group[i]!;
            if (result.status === 'fulfilled') resolve(outputOf(stream, input, result.value));
            else reject(result.reason);
          });
        } catch (err) {
          for (const w of group) w.reject(err);
        }
      }
    } finally {
      stream.running = false;
    }
  };

  return {
    specializes: (node) => configs.has(`${node.app}/${node.node}`),
    templates: () => [...new Set([...configs.values()].flatMap((c) => c.templates))],
    classify(node, image, params, deadlineMs, frame) {
      if (closed) return Promise.reject(new Error(`${node.app}/${node.node}: specialized nodes are closed`));
      const stream = streamOf(node, frame.source);
      stream.lastInputMs = Date.now();
      return new Promise<NodeOutput>((resolve, reject) => {
        stream.waiting.push({ input: { image, deadlineMs, params, frame }, timeMs: frame.captureTimeMs, resolve, reject });
        if (!stream.running) inBackground(drain(stream));
      });
    },
    stats() {
      const now = Date.now();
      const reports: SpecializationStats[] = [];
      for (const [key, stream] of streams) {
        if (now - stream.lastInputMs > idleStreamMs && !stream.running) {
          streams.delete(key);
          inBackground(stream.specializer.close().catch((err: unknown) => logger.warn({ err }, "closing an idle stream's specializer failed")));
          continue;
        }
        const { source, node: { app, node } } = stream;
        const { inputs, specialized, fellThrough, transitions, dominantSum, windowSum, oracleCalls, cascadeOracleCalls, retrains, retrainMs, phase } = stream.specializer.status();
        const last = stream.reported;
        // A cascade's input counts when it comes and its fall-through when the oracle has answered:
        // a stream that sent its last inputs since the last report may still have fall-throughs to tell.
        if (inputs === last.inputs && fellThrough === last.fellThrough && oracleCalls === last.oracleCalls) continue;
        const intervalTemplateRuns = Object.fromEntries([...stream.templateRuns].map(([model, runs]) => [model, runs - (last.templateRuns.get(model) ?? 0)]));
        const intervalCascadeOracleCalls = Object.fromEntries(Object.entries(cascadeOracleCalls).map(([model, calls]) => [model, calls - (last.cascadeOracleCalls[model] ?? 0)]));
        stream.reported = { inputs, fellThrough, oracleCalls, templateRuns: new Map(stream.templateRuns), cascadeOracleCalls };
        reports.push({
          ...{ app, node, source, phase, inputs, specialized, fellThrough, transitions, dominantSum, windowSum, oracleCalls, retrains, retrainMs },
          ...{ intervalInputs: inputs - last.inputs, intervalOracleCalls: oracleCalls - last.oracleCalls, intervalTemplateRuns, intervalCascadeOracleCalls },
        });
      }
      return reports;
    },
    async close() {
      closed = true;
      // What is being classified first (and the pool rows it adds), then the heads.
      while (background.size > 0) await Promise.allSettled([...background]);
      await Promise.all([...streams.values()].map(async (s) => s.specializer.close()));
      streams.clear();
      while (background.size > 0) await Promise.allSettled([...background]);
      failures.close();
      await trainer?.close();
      if (headDir) rmSync(headDir, { recursive: true, force: true });
    },
  };
}
