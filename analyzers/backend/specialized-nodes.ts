import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AppLogic, FrameRef, Logger, NodeOutput, ResolvedModel, SpecializeConfig, Stats } from '../../core/index.js';
import type { DagNode } from '../dag/index.js';
import type { ImageInput } from '../image/index.js';
import { loadFeatureExtractor, type FeatureExtractor } from '../models/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { createSpecializer, createStreamPool, type Specializer, type SpecializerTemplate, type StreamPool } from '../specialize/index.js';
import { createHeadTrainer, type HeadTrainer } from '../training/index.js';

/**
 * The nodes of this backend's apps that declare `specialize:`: one specializer (WEG with its
 * cascade) per stream and node, keyed by source, which the bus keeps on one backend. The oracle
 * is the node's own session, batched with every other stream's requests; templates' feature
 * layers and the trained heads run on the runtime beside it, and heads are retrained on one
 * training thread shared by every stream. Each template's pool is the stream's own inputs as
 * the oracle labelled them (`createStreamPool`).
 */

export type SpecializationStats = NonNullable<Stats['specializations']>[number];

export interface SpecializedNodesOptions {
  apps: readonly AppLogic[];
  models: Readonly<Record<string, ResolvedModel>>;
  runtime: ModelRuntime;
  /** Runs the oracle: one image through the node's own session by its deadline. */
  infer(node: DagNode, image: ImageInput, params: unknown, deadlineMs: number): Promise<NodeOutput>;
  logger: Logger;
  random?: () => number;
}

export interface SpecializedNodes {
  specializes(node: DagNode): boolean;
  /** The node's answer for one input of the stream `frame.source`; a stream's inputs are classified one at a time, in the order they come. */
  classify(node: DagNode, image: ImageInput, params: unknown, deadlineMs: number, frame: FrameRef): Promise<NodeOutput>;
  /** Table 5.4's counts per stream and node, since this backend began serving the stream, and the oracle's share since the last call. */
  stats(): SpecializationStats[];
  close(): Promise<void>;
}

/** The thesis' training skew by workload (§5.4), and the most rows one retraining reads. */
const TRAINING_SKEW = { faces: 0.5, objects: 0.6 } as const;
const MAX_TRAINING_ROWS = 600;

interface Stream {
  specializer: Specializer<ImageInput>;
  pools: { pool: StreamPool; extractor: () => Promise<FeatureExtractor> }[];
  /** The request in flight: the oracle runs it by its deadline and with its params. */
  current?: { deadlineMs: number; params: unknown; output?: NodeOutput };
  /** The previous input's classification: the next waits for it. */
  queue: Promise<unknown>;
  /** Counts at the last stats, for the interval's. */
  reported: { inputs: number; oracleCalls: number };
}

export function createSpecializedNodes(options: SpecializedNodesOptions): SpecializedNodes {
  const logger = options.logger.child({ module: 'analyzers.specialize' });
  const random = options.random ?? Math.random;
  const configs = new Map<string, SpecializeConfig>();
  for (const app of options.apps) for (const node of app.spec.nodes) if (node.specialize) configs.set(`${app.spec.name}/${node.id}`, node.specialize);
  const streams = new Map<string, Stream>();
  const extractors = new Map<string, Promise<FeatureExtractor>>();
  let trainer: HeadTrainer | undefined;
  let headDir: string | undefined;

  const extractorOf = (model: string): Promise<FeatureExtractor> => {
    let extractor = extractors.get(model);
    if (!extractor) {
      extractor = loadFeatureExtractor(options.models[model]!, options.runtime);
      extractors.set(model, extractor);
      // A template that cannot load is said once; the stream's oracle keeps answering.
      extractor.catch((err: unknown) => logger.error({ err, model }, 'a specialization template could not be loaded'));
    }
    return extractor;
  };
  const train = () => (trainer ??= createHeadTrainer());

  const streamOf = (node: DagNode, source: string): Stream => {
    const key = `${source}\u0000${node.app}/${node.node}`;
    const existing = streams.get(key);
    if (existing) return existing;
    const config = configs.get(`${node.app}/${node.node}`)!;
    const training = { skew: config.trainingSkew ?? TRAINING_SKEW[config.workload], maxRows: MAX_TRAINING_ROWS };
    const pools = config.templates.map((model) => ({ pool: createStreamPool({ rowsPerClass: config.poolRowsPerClass, training, random }), extractor: () => extractorOf(model) }));
    const templates: SpecializerTemplate<ImageInput>[] = config.templates.map((model, i) => ({
      name: model,
      behaviour: (n) => pools[i]!.pool.behaviour(n),
      get pool() {
        return pools[i]!.pool.pool;
      },
      features: async (images) => (await pools[i]!.extractor()).features(images),
    }));
    const created: Stream = {
      pools,
      queue: Promise.resolve(),
      reported: { inputs: 0, oracleCalls: 0 },
      specializer: createSpecializer<ImageInput>({
        name: `${node.app}-${node.node}`,
        templates,
        weg: config,
        training,
        train: (job) => train().train(job),
        runtime: options.runtime,
        headDir: (headDir ??= mkdtempSync(join(tmpdir(), 'panoptes-heads-'))),
        random,
        oracle: async (images) => {
          const { deadlineMs, params } = created.current!;
          return Promise.all(
            images.map(async (image) => {
              const output = await options.infer(node, image, params, deadlineMs);
              const label = output.kind === 'attributes' ? output.attributes[0]?.value : undefined;
              if (label === undefined) throw new TypeError(`${node.app}/${node.node}: the oracle ${node.model} answered no class (${output.kind})`);
              created.current!.output = output;
              return label;
            }),
          );
        },
      }),
    };
    streams.set(key, created);
    return created;
  };

  /** An input the oracle labelled joins each template's pool where the pool keeps it. */
  const remember = async (stream: Stream, image: ImageInput, label: string): Promise<void> => {
    for (const { pool, extractor } of stream.pools) {
      const slot = pool.admit(label);
      if (slot === undefined) continue;
      pool.fill(label, slot, await (await extractor()).features([image]));
      pool.measureIfDue((job) => train().train(job)).catch((err: unknown) => logger.warn({ err }, 'measuring a template on the stream pool failed'));
    }
  };

  const classify = async (stream: Stream, node: DagNode, image: ImageInput, params: unknown, deadlineMs: number, frame: FrameRef): Promise<NodeOutput> => {
    stream.current = { deadlineMs, params };
    const result = await stream.specializer.classify(image, frame.captureTimeMs);
    const oracle = stream.current.output;
    if (result.answeredBy === 'cascade' || !oracle || oracle.kind !== 'attributes') {
      const name = oracle?.kind === 'attributes' ? oracle.attributes[0]!.name : 'class';
      return { kind: 'attributes', attributes: [{ name, value: result.label, number: 0, score: result.score ?? 0 }], answeredBy: result.answeredBy };
    }
    try {
      await remember(stream, image, result.label);
    } catch (err) {
      logger.warn({ err, node: `${node.app}/${node.node}` }, 'an input could not join the specialization pool');
    }
    return { ...oracle, answeredBy: result.answeredBy };
  };

  return {
    specializes: (node) => configs.has(`${node.app}/${node.node}`),
    classify(node, image, params, deadlineMs, frame) {
      const stream = streamOf(node, frame.source);
      const done = stream.queue.then(() => classify(stream, node, image, params, deadlineMs, frame));
      stream.queue = done.catch(() => undefined);
      return done;
    },
    stats: () =>
      [...streams].map(([key, stream]) => {
        const [source, at] = key.split('\u0000') as [string, string];
        const [app, node] = at.split('/') as [string, string];
        const { inputs, specialized, fellThrough, transitions, dominantSum, windowSum, oracleCalls, retrains, retrainMs, phase } = stream.specializer.status();
        const interval = { intervalInputs: inputs - stream.reported.inputs, intervalOracleCalls: oracleCalls - stream.reported.oracleCalls };
        stream.reported = { inputs, oracleCalls };
        return { app, node, source, phase, inputs, specialized, fellThrough, transitions, dominantSum, windowSum, oracleCalls, ...interval, retrains, retrainMs };
      }),
    async close() {
      await Promise.all([...streams.values()].map(async (s) => s.specializer.close()));
      streams.clear();
      await trainer?.close();
      for (const extractor of extractors.values()) await (await extractor.catch(() => undefined))?.dispose();
      extractors.clear();
      if (headDir) rmSync(headDir, { recursive: true, force: true });
    },
  };
}
