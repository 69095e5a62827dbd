/**
 * Backends follow the scheduler's plan: a plan that moves the detector session from backend A
 * to backend B while frames keep coming moves the frames' partitions and the model, and every
 * frame still gets its rows. On the memory bus and on the real broker.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createBackend, createOnnxRuntime } from '../../analyzers/index.js';
import { createAppLogic } from '../../apps/index.js';
import {
  appSpecSchema,
  createKafkaBus,
  createMemoryBus,
  dropContract,
  frameContract,
  loadModelZoo,
  parseConfig,
  planContract,
  projectRoot,
  resultRowContract,
  silentLogger,
  Topics,
  type Bus,
  type TopicPartitionOffset,
  type Drop,
  type Plan,
  type ResultRow,
} from '../../core/index.js';
import { waitFor } from '../conformance/wait-for.js';
import { capturingLogger } from '../helpers.js';
import { serverAddress, serverSkipReason } from '../servers.js';

const root = projectRoot();
const jpeg = readFileSync(join(root, 'test/fixtures/images/room-person.jpg'));
const models = loadModelZoo();
/** The traffic app's detector alone: the plan routes frames only, and this test is about them. */
const traffic = createAppLogic(parseConfig(appSpecSchema, 'name: traffic\nsloMs: 2000\nnodes: [{ id: detect, model: centernet }]\nedges: [{ from: frames, to: detect }]\n', 'traffic-detector.yaml'));
const SESSION = 'centernet@1000';

/** The detector session on one backend, all of the frames topic routed to it. */
const planOn = (backend: string, epoch: number): Plan => ({
  epoch,
  createdAtMs: Date.now(),
  sessions: [{ id: SESSION, model: 'centernet', sloMs: 1000, nodes: [{ app: 'traffic', node: 'detect' }] }],
  backends: [{ backend, dutyCycleMs: 500, sessions: [{ session: SESSION, batch: 2 }] }],
  routing: [{ session: SESSION, topic: Topics.frames, weights: { [backend]: 1 } }],
});

function describeMove(name: string, openBus: () => Promise<Bus>, timeoutMs: number): void {
  it(`${name}: a plan moves a session to another backend without losing a frame`, async () => {
    const bus = await openBus();
    const runtime = createOnnxRuntime({ logger: silentLogger() });
    const run = randomUUID().slice(0, 8);
    const groupId = `plan-follow-${run}`;
    const backendOf = (id: string) =>
      createBackend({ id, bus, runtime, models, apps: [traffic], appsForSource: () => ['traffic'], realtime: () => false, batch: 2, groupId, statsIntervalMs: 200, logger: silentLogger() });
    const [a, b] = [backendOf(`a-${run}`), backendOf(`b-${run}`)];
    const framesStored = new Set<string>();
    const drops: Drop[] = [];
    try {
      await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead].map((topic) => ({ name: topic, partitions: 4 })));
      // Other tests' records may be on these topics of a shared broker: this run's sources only.
      const ours = (source: string | undefined): boolean => source?.startsWith(`cam-${run}-`) === true;
      await bus.consumer({ groupId: `observer-${run}`, topics: [Topics.results, Topics.drops] }).run(async (batch) => {
        for (const m of batch.messages) {
          const drop = batch.topic === Topics.drops ? dropContract.decode(m.value) : undefined;
          if (drop && ours(drop.source)) drops.push(drop);
          const row = batch.topic === Topics.results ? resultRowContract.decode(m.value) : undefined;
          if (row?.table === 'frames' && ours(row.source)) framesStored.add(`${row.source}/${String(row.fields.frame_seq)}`);
        }
      });
      await skipBacklog(bus, groupId, [Topics.frames, Topics.backfillFrames], timeoutMs);
      await Promise.all([a.start(), b.start()]);
      const producer = bus.producer();
      let sent = 0;
      const send = async (): Promise<void> => {
        const source = `cam-${run}-${sent % 4}`;
        const frame = { source, seq: sent, captureTimeMs: Date.now(), ptsMs: sent * 100, width: 768, height: 432, jpeg };
        await producer.send(Topics.frames, [{ key: source, value: frameContract.encode(frame) }]);
        sent += 1;
      };
      const publish = (plan: Plan) => producer.send(Topics.plan, [{ key: 'plan', value: planContract.encode(plan) }]);

      await publish(planOn(`a-${run}`, 1));
      // The frames topic and the backfill frames beside it (routed as the frames are): 4 partitions each.
      await waitFor(() => a.status().planEpoch === 1 && b.status().planEpoch === 1 && a.status().partitions === 8, 'both backends to follow plan 1', { timeoutMs });
      expect(b.status().partitions).toBe(0);
      for (let i = 0; i < 8; i++) await send();
      await waitFor(() => framesStored.size === 8, 'the first 8 frames stored', { timeoutMs });
      expect(a.status().frames).toBe(8);
      expect(b.status().frames).toBe(0);

      // Frames keep coming while the session moves.
      let sending = true;
      const stream = (async () => {
        while (sending) {
          await send();
          await new Promise((r) => setTimeout(r, 150));
        }
      })();
      await publish(planOn(`b-${run}`, 2));
      await waitFor(() => a.status().planEpoch === 2 && b.status().planEpoch === 2 && b.status().partitions === 8, 'both backends to follow plan 2', { timeoutMs });
      const aFrames = a.status().frames;
      await new Promise((r) => setTimeout(r, 1500));
      sending = false;
      await stream;
      await waitFor(() => framesStored.size === sent, `all ${sent} frames stored`, { timeoutMs });

      expect(drops).toEqual([]);
      expect(a.status().partitions).toBe(0);
      expect(a.status().frames).toBe(aFrames);
      expect(b.status().frames).toBeGreaterThan(0);
      // A hosts nothing now: its detector is unloaded once its last batch is done.
      await waitFor(() => a.status().models.length === 0, 'backend A to unload the detector', { timeoutMs });
      expect(b.status().models).toEqual(['centernet']);
    } finally {
      await Promise.all([a.close(), b.close()]);
      await runtime.close();
      await bus.close();
    }
  }, timeoutMs * 4);
}

/**
 * Commits `groupId` past every record already on `topics`, so that its members start with what
 * is sent next: other tests leave frames on a shared broker's topics, which the backends would
 * otherwise analyze first (a new group reads from the earliest record).
 */
async function skipBacklog(bus: Bus, groupId: string, topics: readonly string[], timeoutMs: number): Promise<void> {
  // A topic just created may not answer for its offsets yet ("not the leader"): asked again, as waitUntilConsumed does.
  let ends: TopicPartitionOffset[][] | undefined;
  await waitFor(async () => (ends = await Promise.all(topics.map((topic) => bus.endOffsets(topic))).catch(() => undefined)) !== undefined, "the topics' end offsets", { timeoutMs });
  const skipper = bus.consumer({ groupId, topics: [...topics] });
  await skipper.run(async () => {});
  const skipped = async (): Promise<boolean> => {
    const committed = await Promise.all(topics.map((topic) => bus.committed(groupId, topic)));
    return ends!.every((partitions, i) => partitions.every((end) => end.offset === 0 || (committed[i]!.find((c) => c.partition === end.partition)?.offset ?? 0) >= end.offset));
  };
  await waitFor(skipped, 'the backlog skipped', { timeoutMs });
  await skipper.close();
}

/**
 * One backend `x` on the memory bus, running `app`: it follows `plan`, then takes one frame of
 * source `cam`. Returns the rows stored once `done` says so, and the backend's models then.
 */
async function oneFrameUnder(app: ReturnType<typeof createAppLogic>, plan: Plan, done: (rows: ResultRow[]) => boolean, logger = silentLogger()): Promise<{ rows: ResultRow[]; models: string[] }> {
  const bus = createMemoryBus();
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const backend = createBackend({ id: 'x', bus, runtime, models, apps: [app], appsForSource: () => [app.spec.name], realtime: () => false, batch: 1, logger });
  const rows: ResultRow[] = [];
  try {
    await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead].map((name) => ({ name, partitions: 1 })));
    await bus.consumer({ groupId: 'observer', topics: [Topics.results] }).run(async (batch) => {
      for (const m of batch.messages) rows.push(resultRowContract.decode(m.value));
    });
    await backend.start();
    const producer = bus.producer();
    await producer.send(Topics.plan, [{ key: 'plan', value: planContract.encode(plan) }]);
    await waitFor(() => backend.status().planEpoch === plan.epoch, 'the plan followed');
    await producer.send(Topics.frames, [{ key: 'cam', value: frameContract.encode({ source: 'cam', seq: 0, captureTimeMs: Date.now(), ptsMs: 0, width: 768, height: 432, jpeg }) }]);
    await waitFor(() => done(rows), 'the frame stored');
    return { rows, models: backend.status().models };
  } finally {
    await backend.close();
    await runtime.close();
    await bus.close();
  }
}

/** A plan with one session on backend `x`, serving the given nodes and fed all of the frames. */
const onePlan = (session: Plan['sessions'][number]): Plan => ({
  epoch: 1,
  createdAtMs: Date.now(),
  sessions: [session],
  backends: [{ backend: 'x', dutyCycleMs: 500, sessions: [{ session: session.id, batch: 1 }] }],
  routing: [{ session: session.id, topic: Topics.frames, weights: { x: 1 } }],
});

describe('a plan that gives a node to another model\'s session', () => {
  it('BAD INPUT: the backend says so, and the node\'s frames get their rows from its own model', async () => {
    const { logger, warnings } = capturingLogger();
    const wrong = onePlan({ id: 'blazeface@1000', model: 'blazeface', sloMs: 1000, nodes: [{ app: 'traffic', node: 'detect' }] });
    const { models: loaded } = await oneFrameUnder(traffic, wrong, (rows) => rows.some((r) => r.table === 'frames'), logger);
    expect(warnings.join('\n')).toContain('the plan gives traffic/detect (model centernet) to a session of blazeface');
    expect(loaded).toContain('centernet');
  }, 60_000);
});

describe('a plan that serves a node with a cheaper variant (MCDNN)', () => {
  it('runs the variant for the node, and its rows name the model that made them', async () => {
    const kinds = createAppLogic(parseConfig(appSpecSchema, 'name: kinds\nsloMs: 2000\nnodes: [{ id: kind, model: efficientnet-lite2 }]\nedges: [{ from: frames, to: kind }]\n', 'kinds.yaml'));
    const downgraded = onePlan({ id: 'efficientnet-lite0@1000', model: 'efficientnet-lite0', sloMs: 1000, nodes: [{ app: 'kinds', node: 'kind' }], variantOf: 'efficientnet-lite2', accuracy: 0.48 });
    const { rows, models: loaded } = await oneFrameUnder(kinds, downgraded, (r) => r.some((row) => row.table === 'recognitions'));
    expect(rows.filter((r) => r.table === 'recognitions').map((r) => r.fields.model)).toEqual(['efficientnet-lite0']);
    expect(loaded).toContain('efficientnet-lite0');
  }, 60_000);
});

describe('backends following the plan', () => {
  describeMove('memory bus', async () => createMemoryBus(), 20_000);
  describe.skipIf(serverSkipReason('kafka') !== undefined)('kafka', () => {
    describeMove('kafka', async () => createKafkaBus({ brokers: [serverAddress('kafka') ?? ''], logger: silentLogger() }), 60_000);
  });
});
