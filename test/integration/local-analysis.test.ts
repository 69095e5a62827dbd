/**
 * Collaborative processing: while a backend reports congestion of the detector, the ingest
 * worker runs the detector on its own frames and sends the detections along; a backend uses
 * them instead of running the node, and stores the same rows.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, createLocalAnalysis, createOnnxRuntime, taskTopics } from '../../analyzers/index.js';
import { createAppLogic } from '../../apps/index.js';
import {
  createMemoryBus,
  frameContract,
  loadApp,
  loadModelZoo,
  projectRoot,
  resultRowContract,
  silentLogger,
  sourceSchema,
  statsContract,
  Topics,
  type Frame,
  type ResultRow,
  type Stats,
} from '../../core/index.js';
import { createIngest, resolveFfmpegPath } from '../../ingest/index.js';
import { waitFor } from '../conformance/wait-for.js';

const root = projectRoot();
const models = loadModelZoo();
const trafficSpec = loadApp(join(root, 'configs/apps/traffic.yaml'), models);
const jpeg = readFileSync(join(root, 'test/fixtures/images/room-person.jpg'));
let dir: string;
let clip: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'panoptes-local-'));
  clip = join(dir, 'road.mp4');
  // Two seconds of the room picture as a clip: frames with a person in them.
  execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-loop', '1', '-i', join(root, 'test/fixtures/images/room-person.jpg'), '-t', '2', '-r', '5', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-vf', 'scale=trunc(iw/2)*2:trunc(ih/2)*2', clip]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const congestedStats = (badRate: number, session = 'centernet@2000'): Stats => ({
  backend: 'b1',
  fromMs: Date.now() - 1000,
  toMs: Date.now(),
  sessions: [{ session, arrivalRate: 20, queueLength: 12, batchSizes: [4], latencyP50Ms: 900, latencyP99Ms: 2500, dropped: 5, badRate }],
  edges: [],
});

describe('collaborative processing', () => {
  it('the ingest worker analyzes its frames itself while a backend reports congestion, and only then', async () => {
    const bus = createMemoryBus();
    const runtime = createOnnxRuntime({ logger: silentLogger() });
    const local = createLocalAnalysis({ bus, runtime, models, apps: [trafficSpec], model: 'centernet', replaces: 'centernet', maxBadRate: 0.05, holdMs: 1500, logger: silentLogger() });
    const published: Frame[] = [];
    try {
      await bus.createTopics([Topics.frames, Topics.stats].map((name) => ({ name, partitions: 1 })));
      await bus.consumer({ groupId: 'reader', topics: [Topics.frames] }).run(async (batch) => {
        published.push(...batch.messages.map((m) => frameContract.decode(m.value)));
      });
      await local.start();
      const producer = bus.producer();
      const source = sourceSchema.parse({ id: 'road', path: clip, apps: ['traffic'], speed: 1 });
      const frame: Frame = { source: 'road', seq: 0, captureTimeMs: Date.now(), ptsMs: 0, width: 768, height: 432, jpeg };

      // Nobody is congested: the frame goes as it came.
      expect((await local.analyze(frame, source)).local).toBeUndefined();
      // Another model's congestion is not this one's.
      await producer.send(Topics.stats, [{ key: 'b1', value: statsContract.encode(congestedStats(0.5, 'ppocr-rec@2000')) }]);
      await new Promise((r) => setTimeout(r, 100));
      expect((await local.analyze(frame, source)).local).toBeUndefined();

      await producer.send(Topics.stats, [{ key: 'b1', value: statsContract.encode(congestedStats(0.3)) }]);
      await waitFor(() => local.status().congested, 'the congestion report');
      const analyzed = await local.analyze({ ...frame, captureTimeMs: Date.now() }, source);
      expect(analyzed.local).toHaveLength(1);
      expect(analyzed.local![0]).toMatchObject({ app: 'traffic', node: 'detect', model: 'centernet' });
      // The person in the room (the detector's golden test finds her at 0.75).
      expect(analyzed.local![0]!.detections.map((d) => d.className)).toContain('person');
      expect(local.status().estimateMs).toBeGreaterThan(0);
      // A frame whose deadline has passed is not worth a local run: the estimate says it would miss.
      expect((await local.analyze({ ...frame, captureTimeMs: Date.now() - 10_000 }, source)).local).toBeUndefined();

      // Through the ingest worker: frames go out with their detections while congestion lasts.
      const ingest = createIngest({ bus, dataDir: dir, logger: silentLogger(), local });
      const keepCongested = setInterval(() => void producer.send(Topics.stats, [{ key: 'b1', value: statsContract.encode(congestedStats(0.3)) }]), 500);
      ingest.add(source);
      await ingest.idle();
      clearInterval(keepCongested);
      const [metrics] = ingest.metrics();
      await ingest.close();
      expect(metrics!.published).toBe(10);
      expect(metrics!.analyzedHere).toBeGreaterThanOrEqual(5);
      await waitFor(() => published.length === 10, 'the 10 frames');
      expect(published.filter((f) => f.local).length).toBe(metrics!.analyzedHere);

      // The report expires after holdMs with no new one: frames go as they came again.
      await waitFor(() => !local.status().congested, 'the congestion to pass', { timeoutMs: 5000 });
      expect((await local.analyze({ ...frame, captureTimeMs: Date.now() }, source)).local).toBeUndefined();
      await producer.close();
    } finally {
      await local.close();
      await runtime.close();
      await bus.close();
    }
  }, 60_000);

  it('a backend takes the detections sent with a frame instead of running its first node', async () => {
    const bus = createMemoryBus();
    const runtime = createOnnxRuntime({ logger: silentLogger() });
    const traffic = createAppLogic(trafficSpec);
    const backend = createBackend({ id: 'b1', bus, runtime, models, apps: [traffic], appsForSource: () => [], batch: 2, logger: silentLogger() });
    const rows: ResultRow[] = [];
    try {
      await bus.createTopics([Topics.frames, Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead, ...taskTopics([traffic])].map((name) => ({ name, partitions: 1 })));
      await bus.consumer({ groupId: 'observer', topics: [Topics.results] }).run(async (batch) => {
        rows.push(...batch.messages.map((m) => resultRowContract.decode(m.value)));
      });
      await backend.start();
      const truck = { box: { x1: 10, y1: 20, x2: 110, y2: 90 }, classId: 7, className: 'truck', score: 0.9 };
      const frame: Frame = {
        source: 'road', seq: 0, captureTimeMs: Date.now(), ptsMs: 0, width: 768, height: 432, jpeg,
        // The apps travel with the frame: this backend was told of no source.
        apps: ['traffic'],
        local: [{ app: 'traffic', node: 'detect', model: 'centernet', detections: [truck] }],
      };
      await bus.producer().send(Topics.frames, [{ key: 'road', value: frameContract.encode(frame) }]);
      await waitFor(() => rows.some((r) => r.table === 'frames'), 'the frame row');
      const detections = rows.filter((r) => r.table === 'detections');
      expect(detections.map((r) => r.fields.class)).toEqual(['truck']);
      expect(backend.status()).toMatchObject({ localOutputs: 1, imagesRun: 0, drops: 0 });
    } finally {
      await backend.close();
      await runtime.close();
      await bus.close();
    }
  }, 60_000);
});
