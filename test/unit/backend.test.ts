import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, createOnnxRuntime, taskTopics } from '../../analyzers/index.js';
import { createAppLogic } from '../../apps/index.js';
import {
  createMemoryBus,
  DeadLetterHeaders,
  dropContract,
  frameContract,
  loadApp,
  loadModelZoo,
  projectRoot,
  resultRowContract,
  silentLogger,
  taskContract,
  Topics,
  type BusMessage,
  type Drop,
  type ResultRow,
  type Stats,
} from '../../core/index.js';
import { waitFor } from '../conformance/wait-for.js';

const root = projectRoot();
const jpeg = readFileSync(join(root, 'test/fixtures/images/room-person.jpg'));

describe('backend', () => {
  const bus = createMemoryBus();
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const models = loadModelZoo();
  const traffic = createAppLogic(loadApp(join(root, 'configs/apps/traffic.yaml'), models));
  // No crops: its frames go to the detector as JPEGs, decoded in the model's batch.
  const detect = createAppLogic(loadApp(join(root, 'bench/apps/detect.yaml'), models));
  const backend = createBackend({
    id: 'test-0',
    bus,
    runtime,
    models,
    apps: [traffic, detect],
    appsForSource: (source) => (source === 'orphan' ? [] : source === 'bare' ? ['detect'] : ['traffic']),
    // One live camera; the rest are replays faster than real time, never dropped for time, so
    // these tests hold on a loaded machine.
    realtime: (source) => source === 'live-cam',
    batch: 4,
    statsIntervalMs: 200,
    idleSourceMs: 1500,
    onStats: (s) => stats.push(s),
    logger: silentLogger(),
  });
  const stats: Stats[] = [];
  const rows: ResultRow[] = [];
  const drops: Drop[] = [];
  const deadLetters: BusMessage[] = [];

  beforeAll(async () => {
    await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead, ...taskTopics([traffic])].map((name) => ({ name, partitions: 2 })));
    await backend.start();
    await bus.consumer({ groupId: 'dead-reader', topics: [Topics.dead] }).run(async (batch) => {
      deadLetters.push(...batch.messages);
    });
    await bus.consumer({ groupId: 'observer', topics: [Topics.results, Topics.drops] }).run(async (batch) => {
      for (const m of batch.messages) {
        if (batch.topic === Topics.results) rows.push(resultRowContract.decode(m.value));
        else drops.push(dropContract.decode(m.value));
      }
    });
  });
  afterAll(async () => {
    await backend.close();
    await runtime.close();
    await bus.close();
  });

  it('turns good frames into rows and every bad one into a drop with its reason, and keeps going', async () => {
    const frame = (source: string, seq: number, bytes: Uint8Array): Uint8Array =>
      frameContract.encode({ source, seq, captureTimeMs: Date.now() + seq * 500, ptsMs: seq * 500, width: 768, height: 432, jpeg: bytes });
    await bus.producer().send(Topics.frames, [
      { key: 'room', value: frame('room', 0, jpeg) },
      { key: 'room', value: frame('room', 1, new Uint8Array([0xff, 0xd8, 1, 2, 3])) },
      { key: 'room', value: new Uint8Array([1, 2, 3]) },
      { key: 'orphan', value: frame('orphan', 0, jpeg) },
      { key: 'room', value: frame('room', 2, jpeg) },
    ]);
    await waitFor(() => backend.status().frames === 4 && drops.length === 3 && rows.some((r) => r.fields.frame_seq === 2), 'five frames handled');

    expect(drops.map((d) => d.why).sort()).toEqual(['decode', 'image-decode', 'no-app']);
    expect(drops.find((d) => d.why === 'image-decode')).toMatchObject({ what: 'frame', source: 'room', frameSeq: 1 });
    // The undecodable message itself is kept, bytes untouched, on the dead-letter topic.
    await waitFor(() => deadLetters.length === 1, 'the dead letter');
    expect([...deadLetters[0]!.value]).toEqual([1, 2, 3]);
    expect(deadLetters[0]!.headers).toMatchObject({ [DeadLetterHeaders.stage]: 'backend:test-0', [DeadLetterHeaders.topic]: Topics.frames });
    const people = rows.filter((r) => r.table === 'detections' && r.fields.class === 'person');
    expect(people.map((r) => r.fields.frame_seq).sort()).toEqual([0, 2]);
    expect(rows.filter((r) => r.table === 'frames').map((r) => r.fields.frame_seq).sort()).toEqual([0, 2]);
  });

  it('fails only the frame whose JPEG is cut short, not the batch it was decoded in', async () => {
    const cut = jpeg.subarray(0, jpeg.length >> 1); // its header is whole: the body fails in the batch's decode
    const now = Date.now();
    const frames = [0, 1, 2, 3, 4, 5].map((seq) => ({
      key: 'bare',
      value: frameContract.encode({ source: 'bare', seq, captureTimeMs: now + seq, ptsMs: seq * 200, width: 768, height: 432, jpeg: seq === 2 ? cut : jpeg }),
    }));
    await bus.producer().send(Topics.frames, frames);
    const stored = (): number[] => rows.filter((r) => r.table === 'frames' && r.source === 'bare').map((r) => Number(r.fields.frame_seq));
    await waitFor(() => stored().length === 5 && drops.some((d) => d.source === 'bare'), 'five frames stored and one dropped');
    expect(stored().sort()).toEqual([0, 1, 3, 4, 5]);
    // libvips' own words for it vary under load (its error text is shared by its threads): the stage and image are named.
    expect(drops.filter((d) => d.source === 'bare')).toEqual([expect.objectContaining({ what: 'frame', frameSeq: 2, why: 'image-decode', detail: expect.stringContaining('detect/detect: centernet: image 0: ') })]);
    expect(rows.filter((r) => r.table === 'detections' && r.source === 'bare' && r.fields.class === 'person').length).toBe(5);
  });

  it('reports every interval what each session saw: arrivals, batches, latency, drops, frames per app', async () => {
    // Start on an interval boundary: the next interval holds only this test's requests.
    stats.length = 0;
    await waitFor(() => stats.length > 0, 'one stats interval');
    stats.length = 0;
    const now = Date.now();
    // One frame names its app three times: it is still one frame for it.
    const frames = [0, 1, 2].map((seq) => ({ key: 'room', value: frameContract.encode({ source: 'room', seq: 100 + seq, captureTimeMs: now, ptsMs: 0, width: 768, height: 432, jpeg, ...(seq === 1 ? { apps: ['traffic', 'traffic', 'traffic'] } : {}) }) }));
    await bus.producer().send(Topics.frames, frames);
    await waitFor(() => stats.reduce((n, s) => n + (s.sessions.find((x) => x.session === 'centernet')?.batchSizes.reduce((a, b) => a + b, 0) ?? 0), 0) >= 3, 'stats of three images');
    const centernet = stats.flatMap((s) => s.sessions.filter((x) => x.session === 'centernet'));
    const arrivals = stats.reduce((n, s) => n + (s.sessions.find((x) => x.session === 'centernet')?.arrivalRate ?? 0) * ((s.toMs - s.fromMs) / 1000), 0);
    expect(arrivals).toBeCloseTo(3, 6);
    expect(Math.max(...centernet.map((x) => x.latencyP99Ms))).toBeGreaterThan(0);
    expect(centernet.every((x) => x.dropped === 0 && x.badRate === 0)).toBe(true);
    expect(stats.every((s) => s.backend === 'test-0' && s.toMs >= s.fromMs)).toBe(true);
    const framesSeen = stats.flatMap((s) => s.apps ?? []).filter((a) => a.app === 'traffic');
    expect(framesSeen.length).toBeGreaterThan(0);
    // The app's SLO attainment: its three detector requests, all on time.
    expect(framesSeen.reduce((n, a) => n + (a.requests ?? 0), 0)).toBeGreaterThanOrEqual(3);
    expect(framesSeen.every((a) => a.late === 0 && a.dropped === 0)).toBe(true);
  });

  it('runs a crop that travels as raw pixels, and drops one whose bytes do not match its size', async () => {
    const crop = (seq: number, bytes: number) =>
      taskContract.encode({
        app: 'traffic', node: 'find-plate', source: 'room', frameSeq: seq, captureTimeMs: Date.now(), deadlineMs: Date.now() + 60_000, budgetMs: 60_000,
        region: { x1: 0, y1: 0, x2: 40, y2: 20 }, frameWidth: 768, frameHeight: 432, lineage: [`plate-${seq}`], pixels: { width: 40, height: 20 }, jpeg: new Uint8Array(bytes).fill(128),
      });
    const tasksBefore = backend.status().tasks;
    await bus.producer().send(Topics.tasks('ppocr-det'), [{ key: 'room', value: crop(40, 40 * 20 * 3) }, { key: 'room', value: crop(41, 17) }]);
    await waitFor(() => backend.status().tasks === tasksBefore + 2 && drops.some((d) => d.frameSeq === 41), 'both crops handled');
    expect(drops.find((d) => d.frameSeq === 41)).toMatchObject({ what: 'task', why: 'image-decode', detail: expect.stringContaining('40x20 RGB crop needs 2400 bytes, got 17') });
    expect(drops.some((d) => d.frameSeq === 40)).toBe(false);
  });

  it('drops a real-time frame that can no longer meet its SLO, with the reason, and stores nothing for it', async () => {
    const stale = frameContract.encode({ source: 'live-cam', seq: 7, captureTimeMs: Date.now() - 60_000, ptsMs: 0, width: 768, height: 432, jpeg });
    await bus.producer().send(Topics.frames, [{ key: 'live-cam', value: stale }]);
    await waitFor(() => drops.some((d) => d.frameSeq === 7), 'the stale frame dropped');
    expect(drops.find((d) => d.frameSeq === 7)).toMatchObject({ what: 'frame', why: 'deadline', source: 'live-cam', detail: expect.stringContaining('stage traffic/detect') });
    expect(rows.filter((r) => r.fields.frame_seq === 7)).toEqual([]);
  });

  it('takes a frame on the backfill topic as delay-tolerant, whatever it knows of the source (a replay added to an ingest worker elsewhere)', async () => {
    const old = frameContract.encode({ source: 'live-cam', seq: 8, captureTimeMs: Date.now() - 60_000, ptsMs: 0, width: 768, height: 432, jpeg, apps: ['traffic'] });
    await bus.producer().send(Topics.backfillFrames, [{ key: 'live-cam', value: old }]);
    await waitFor(() => rows.some((r) => r.table === 'frames' && r.fields.frame_seq === 8), 'the replayed frame stored');
    expect(drops.filter((d) => d.frameSeq === 8)).toEqual([]);
  });

  it('writes the tracks still in view of a source that stopped sending, without waiting for the backend to drain', async () => {
    const frames = [0, 1, 2, 3].map((seq) => ({ key: 'idle-cam', value: frameContract.encode({ source: 'idle-cam', seq, captureTimeMs: Date.now(), ptsMs: seq * 500, width: 768, height: 432, jpeg }) }));
    await bus.producer().send(Topics.frames, frames);
    await waitFor(() => rows.some((r) => r.table === 'frames' && r.source === 'idle-cam' && r.fields.frame_seq === 3), 'the four frames stored');
    // The person in the room is in view on all four: her track ends only when the source goes idle.
    expect(rows.some((r) => r.table === 'events' && r.source === 'idle-cam')).toBe(false);
    await waitFor(() => rows.some((r) => r.table === 'events' && r.source === 'idle-cam' && r.fields.event === 'track'), 'the track event of the idle source', { timeoutMs: 10_000 });
    const track = rows.find((r) => r.table === 'events' && r.source === 'idle-cam' && r.fields.event === 'track')!;
    expect(track.fields).toMatchObject({ class: 'person', track_id: '0-0' });
  });
});
