/**
 * Bus messages as anyone who can write to a topic could send them: each must cost a stage a
 * bounded amount of work and memory, and never stop it from following the real ones. (The sink's
 * side, strings and times the store would refuse, is in test/unit/sink.test.ts.)
 */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { createPlanFollower } from '../../analyzers/backend/plan-follower.js';
import { jpegImage } from '../../analyzers/index.js';
import { preprocessRec } from '../../analyzers/models/ocr/index.js';
import { createAppLogic } from '../../apps/index.js';
import {
  appSpecSchema,
  createMemoryBus,
  ErrorCode,
  frameContract,
  frameId,
  Groups,
  parseConfig,
  planContract,
  silentLogger,
  statsContract,
  taskContract,
  Topics,
  type AppSpec,
  type Plan,
} from '../../core/index.js';
import { createEpochService, linearProfile, planEpoch, profileLookup, type AppDemand } from '../../scheduler/index.js';
import { frame, plan, stats, task } from '../fixtures/contracts/samples.js';
import { waitFor } from '../conformance/wait-for.js';
import { capturingLogger, thrown } from '../helpers.js';

describe('hostile bus messages', () => {
  it('refuses lists and numbers no honest message comes near, naming the field', () => {
    const refused = (fn: () => unknown): string => {
      const err = thrown(fn);
      expect(err.code).toBe(ErrorCode.ContractDecode);
      return err.message;
    };
    expect(refused(() => frameContract.decode(frameContract.encode({ ...frame, apps: Array(257).fill('traffic') })))).toMatch(/apps/);
    expect(refused(() => taskContract.decode(taskContract.encode({ ...task, lineage: Array(129).fill('x') })))).toMatch(/lineage/);
    // The deepest lineage an app can make (100 nodes, ids of 128 characters) still decodes.
    const deep = Array.from({ length: 100 }, (_, i) => `${'a'.repeat(128)}/${'s'.repeat(128)}/7${`/${'n'.repeat(128)}/3`.repeat(i + 1)}`);
    expect(taskContract.decode(taskContract.encode({ ...task, lineage: deep })).lineage).toHaveLength(100);
    expect(refused(() => taskContract.decode(taskContract.encode({ ...task, pixels: { width: 0, height: 1 } })))).toMatch(/pixels\.width/);
    const flood = { ...stats, apps: [{ app: 'traffic', framesRate: 1e300 }] };
    expect(refused(() => statsContract.decode(statsContract.encode(flood)))).toMatch(/apps\.0\.framesRate/);
    const slow: Plan = { ...plan, sessions: [{ ...plan.sessions[0]!, latencyMs: [1e300] }] };
    expect(refused(() => planContract.decode(planContract.encode(slow)))).toMatch(/sessions\.0\.latencyMs/);
    // Up to the bounds, they decode as before.
    expect(frameContract.decode(frameContract.encode({ ...frame, apps: ['traffic'] })).apps).toEqual(['traffic']);
  });

  it('plans any load in bounded time and size: at most 1024 dedicated nodes a session', () => {
    const profileOf = profileLookup([linearProfile({ model: 'detector', alphaMs: 5, betaMs: 20, maxBatch: 32 })]);
    const demand: AppDemand = { app: 'north', sloMs: 1000, nodes: [{ id: 'detect', model: 'detector' }], edges: [{ from: 'frames', to: 'detect' }], framesRate: 1e8, gammas: {} };
    const started = performance.now();
    const { plan: planned, warnings } = planEpoch({ epoch: 1, nowMs: 0, apps: [demand], backends: ['b1', 'b2'] }, profileOf, { epsilonMs: 50 });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(planned.backends).toHaveLength(2);
    // The rest waits for backends, said in one bounded line.
    const waiting = warnings.find((w) => w.startsWith('the plan needs'));
    expect(waiting).toMatch(/^the plan needs 1025 backends and 2 reported: detector@1000, detector@1000, .* and 1013 more wait for more$/);
    expect(JSON.stringify(planned).length).toBeLessThan(10_000);
  });

  it('skips a plan stamped far ahead of the clock, which would outrank every real plan after it', async () => {
    const bus = createMemoryBus();
    await bus.createTopics([{ name: Topics.plan, partitions: 1 }]);
    const followed: number[] = [];
    const follower = createPlanFollower({ id: 'b1', bus, groupId: 'test', logger: silentLogger(), follow: async (p) => void followed.push(p.epoch) });
    await follower.start();
    const producer = bus.producer();
    const publish = (epoch: number, createdAtMs: number): Promise<unknown> => producer.send(Topics.plan, [{ key: 'plan', value: planContract.encode({ ...plan, epoch, createdAtMs }) }]);
    try {
      await publish(1, Date.now());
      await waitFor(() => followed.includes(1), 'the first plan followed');
      await publish(666, 1e300);
      await publish(2, Date.now() + 1);
      await waitFor(() => followed.includes(2), 'the next real plan followed');
      expect(followed).toEqual([1, 2]);
    } finally {
      await producer.close();
      await follower.close();
      await bus.close();
    }
  });

  it('names the first 16 new backends, then counts made-up ids and unreadable stats in one line each', async () => {
    const bus = createMemoryBus();
    await bus.createTopics([Topics.stats, Topics.plan].map((name) => ({ name, partitions: 1 })));
    const { logger, messages } = capturingLogger('info');
    const scheduler = createEpochService({ bus, apps: [], profileOf: profileLookup([]), logger, epsilonMs: 50 });
    await scheduler.start();
    const producer = bus.producer();
    try {
      const forged = Array.from({ length: 500 }, (_, i) => ({ key: `fake-${i}`, value: statsContract.encode({ ...stats, backend: `fake-${i}` }) }));
      await producer.send(Topics.stats, [...forged, ...Array.from({ length: 100 }, () => ({ key: 'x', value: new Uint8Array([1, 2, 3]) }))]);
      const end = (await bus.endOffsets(Topics.stats))[0]?.offset;
      await waitFor(async () => (await bus.committed(Groups.scheduler, Topics.stats))[0]?.offset === end, 'the stats read');
      expect(messages.filter((m) => m === 'backend registered')).toHaveLength(16);
      expect(messages.filter((m) => m.startsWith('undecodable stats skipped'))).toHaveLength(1);
      await scheduler.close(); // says what it counted
      expect(messages.filter((m) => m.startsWith('more than 16 backends registered'))).toEqual(['more than 16 backends registered within 30 s; the others are counted, not named', 'more than 16 backends registered within 30 s; the others are counted, not named (repeated 483 times in the last 30 s)']);
      expect(messages.filter((m) => m.startsWith('undecodable stats skipped'))).toEqual(['undecodable stats skipped', 'undecodable stats skipped (repeated 99 times in the last 30 s)']);
    } finally {
      await producer.close();
      await scheduler.close();
      await bus.close();
    }
  });

  it('refuses to decode a JPEG whose header claims more than 8K, before any pixel is decoded', async () => {
    const small = await sharp({ create: { width: 16, height: 16, channels: 3, background: { r: 0, g: 0, b: 0 } } }).jpeg().toBuffer();
    // The baseline frame header (SOF0: FF C0, length, precision, then height and width) made to claim 12000×12000.
    const bomb = Uint8Array.from(small);
    const sof = bomb.findIndex((b, i) => b === 0xff && bomb[i + 1] === 0xc0);
    expect(sof).toBeGreaterThan(0);
    new DataView(bomb.buffer).setUint16(sof + 5, 12000);
    new DataView(bomb.buffer).setUint16(sof + 7, 12000);
    const err = await jpegImage(bomb).then(() => undefined, (e: unknown) => e as { code: string; message: string });
    expect(err).toMatchObject({ code: ErrorCode.ImageDecode, message: expect.stringMatching(/12000x12000 is over the limit of 67108864 pixels/) });
    expect((await jpegImage(small)).width).toBe(16);
  });

  it('keeps a text line batch bounded whatever one crop\'s shape: 16000×1 px is squeezed into 3200', () => {
    const line = { width: 16000, height: 1, data: new Uint8Array(16000 * 3) };
    expect(preprocessRec([line, { width: 100, height: 48, data: new Uint8Array(100 * 48 * 3) }]).dims).toEqual([2, 3, 48, 3200]);
  });

  it('tracks on after a frame whose seq was forged far ahead, and a replay run again under its id is tracked afresh', () => {
    const spec = parseConfig(appSpecSchema, 'name: lobby\nsloMs: 2000\nnodes:\n  - { id: people, model: centernet, track: { minIou: 0.2, maxMissedFrames: 1, minFrames: 1 } }\nedges:\n  - { from: frames, to: people }\n', 'lobby.yaml') as AppSpec;
    const logic = createAppLogic(spec);
    const person = { box: { x1: 10, y1: 10, x2: 30, y2: 30 }, classId: 0, className: 'person', score: 0.9 };
    const trackIds = (seq: number): unknown[] =>
      logic
        .rowsFor({ node: spec.nodes[0]!, frame: { source: 'cam', seq, captureTimeMs: 0, mediaTimeMs: seq * 100, width: 100, height: 100 }, output: { kind: 'detections', detections: [person] }, inputId: frameId('lobby', 'cam', seq), root: true })
        .filter((r) => r.table === 'detections')
        .map((r) => r.fields.track_id);
    expect([0, 1, 2].map(trackIds)).toEqual([['0-0'], ['0-0'], ['0-0']]);
    expect(trackIds(1)).toEqual(['']); // a redelivery: stale, not tracked again
    expect(trackIds(Number.MAX_SAFE_INTEGER)).toHaveLength(1); // the forged frame
    expect(trackIds(3)).toEqual(['3-0']); // the stream goes on, tracked afresh
    expect(trackIds(4)).toEqual(['3-0']);
  });
});
