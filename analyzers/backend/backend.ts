import {
  describeError,
  dropContract,
  frameContract,
  resultRowContract,
  Topics,
  type AppLogic,
  type AppNode,
  type Batch,
  type Bus,
  type Consumer,
  type Drop,
  type Frame,
  type Lifecycle,
  type Logger,
  type NodeOutput,
  type ProducerRecord,
  type ResolvedModel,
} from '../../core/index.js';
import { decodeJpeg } from '../image/index.js';
import type { RgbImage } from '../models/types.js';
import { loadModelRunner, type ModelRunner, type RunParams } from '../models/zoo.js';
import type { ModelRuntime } from '../runtime/index.js';
import { createBatcher, type Batcher } from './batcher.js';

export interface BackendOptions {
  id: string;
  bus: Bus;
  runtime: ModelRuntime;
  models: Readonly<Record<string, ResolvedModel>>;
  apps: readonly AppLogic[];
  /** Which apps analyze a source's frames. */
  appsForSource: (source: string) => readonly string[];
  /** Images per model run. */
  batch: number;
  /** Longest a request waits for its batch to fill, ms. */
  batchWaitMs?: number;
  logger: Logger;
  groupId?: string;
}

export interface BackendStatus {
  state: 'idle' | 'running' | 'draining' | 'closed';
  frames: number;
  rows: number;
  drops: number;
  batches: number;
  imagesRun: number;
}

interface RootNode {
  app: AppLogic;
  node: AppNode;
  params: RunParams;
}

type Request = { image: RgbImage; params: RunParams };

/**
 * The model-execution role for the embedded pipeline: consumes frames, runs each app's
 * frame-level nodes (edges from `frames`) in batches that mix frames of all streams,
 * turns outputs into rows with the app logic, and publishes rows and drops.
 * A frame is committed only after its rows are published.
 */
export function createBackend(options: BackendOptions): Lifecycle<BackendStatus> {
  const logger = options.logger.child({ module: 'analyzers.backend', backend: options.id });
  const status: BackendStatus = { state: 'idle', frames: 0, rows: 0, drops: 0, batches: 0, imagesRun: 0 };
  const producer = options.bus.producer();
  const runners = new Map<string, { runner: ModelRunner; batcher: Batcher<Request, NodeOutput> }>();
  const rootNodes = new Map<string, RootNode[]>();
  let consumer: Consumer | undefined;

  const drop = (frame: Partial<Frame> & { source?: string }, what: Drop['what'], why: string, detail: string): ProducerRecord => {
    status.drops += 1;
    logger.warn({ source: frame.source, seq: frame.seq, why, detail }, `${what} dropped`);
    const message: Drop = { what, where: `backend:${options.id}`, why, detail, atMs: Date.now() };
    if (frame.source !== undefined) message.source = frame.source;
    if (frame.seq !== undefined) message.frameSeq = frame.seq;
    return { key: frame.source ?? 'unknown', value: dropContract.encode(message) };
  };

  const processFrame = async (frame: Frame): Promise<{ rows: ProducerRecord[]; drops: ProducerRecord[] }> => {
    const nodes = options.appsForSource(frame.source).flatMap((app) => rootNodes.get(app) ?? []);
    if (nodes.length === 0) return { rows: [], drops: [drop(frame, 'frame', 'no-app', `no app analyzes source ${frame.source}`)] };
    let image: RgbImage;
    try {
      image = await decodeJpeg(frame.jpeg);
    } catch (err) {
      return { rows: [], drops: [drop(frame, 'frame', 'image-decode', describeError(err))] };
    }
    const rows: ProducerRecord[] = [];
    const drops: ProducerRecord[] = [];
    await Promise.all(
      nodes.map(async ({ app, node, params }) => {
        try {
          const output = await runners.get(node.model)!.batcher.submit({ image, params });
          for (const row of app.rowsFor({ node, frame, output })) {
            rows.push({ key: frame.source, value: resultRowContract.encode(row) });
          }
        } catch (err) {
          drops.push(drop(frame, 'frame', 'model-failed', `${app.spec.name}/${node.id}: ${describeError(err)}`));
        }
      }),
    );
    return { rows, drops };
  };

  const handle = async (batch: Batch): Promise<void> => {
    const results = await Promise.all(
      batch.messages.map(async (message) => {
        let frame: Frame;
        try {
          frame = frameContract.decode(message.value);
        } catch (err) {
          return { rows: [], drops: [drop({ source: message.key }, 'message', 'decode', describeError(err))] };
        }
        return processFrame(frame);
      }),
    );
    const rows = results.flatMap((r) => r.rows);
    const drops = results.flatMap((r) => r.drops);
    if (rows.length > 0) await producer.send(Topics.results, rows);
    if (drops.length > 0) await producer.send(Topics.drops, drops);
    status.frames += batch.messages.length;
    status.rows += rows.length;
  };

  return {
    async start() {
      for (const app of options.apps) {
        const roots: RootNode[] = [];
        for (const edge of app.spec.edges.filter((e) => e.from === 'frames')) {
          const node = app.spec.nodes.find((n) => n.id === edge.to)!;
          let entry = runners.get(node.model);
          if (!entry) {
            const runner = await loadModelRunner(options.models[node.model]!, options.runtime);
            const batcher = createBatcher<Request, NodeOutput>({
              maxBatch: Math.min(options.batch, runner.spec.maxBatch),
              maxWaitMs: options.batchWaitMs ?? 10,
              run: async (requests) => {
                status.batches += 1;
                status.imagesRun += requests.length;
                return runner.run(requests.map((r) => r.image), requests.map((r) => r.params));
              },
            });
            entry = { runner, batcher };
            runners.set(node.model, entry);
          }
          roots.push({ app, node, params: entry.runner.parseParams(node.params) });
        }
        const later = app.spec.edges.filter((e) => e.from !== 'frames');
        if (later.length > 0) {
          logger.warn({ app: app.spec.name, nodes: later.map((e) => e.to) }, 'nodes below the root are not run by the embedded backend yet');
        }
        rootNodes.set(app.spec.name, roots);
      }
      consumer = options.bus.consumer({
        groupId: options.groupId ?? 'panoptes.backend',
        topics: [Topics.frames],
        maxBatchSize: options.batch,
        metadata: { backend: options.id },
      });
      await consumer.run(handle);
      status.state = 'running';
    },
    async drain() {
      status.state = 'draining';
      await Promise.all([...runners.values()].map((r) => r.batcher.flush()));
    },
    async close() {
      await consumer?.close();
      await producer.close();
      await Promise.all([...runners.values()].map((r) => r.runner.dispose()));
      status.state = 'closed';
    },
    status: () => ({ ...status }),
  };
}
