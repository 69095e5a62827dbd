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

const congestedStats = (badRate: number, session = 'centernet@2000', latencyP99Ms = 2500): Stats => ({
  backend: 'b1',
  fromMs: Date.now() - 1000,
  toMs: Date.now(),
  sessions: [{ session, arrivalRate: 20, queueLength: 12, batchSizes: [4], latencyP50Ms: 900, latencyP99Ms, dropped: 5, badRate }],
  edges: [],
});

/** Local analysis of CenterNet standing in for itself, started on a memory bus with the frames and stats topics; closed after `body`. */
async function withLocalAnalysis(holdMs: number, body: (local: ReturnType<typeof createLocalAnalysis>, bus: ReturnType<typeof createMemoryBus>) => Promise<void>): Promise<void> {
  const bus = createMemoryBus();
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const local = createLocalAnalysis({ bus, runtime, models, apps: [trafficSpec], model: 'centernet', replaces: 'centernet', maxBadRate: 0.05, holdMs, logger: silentLogger() });
  try {
    await bus.createTopics([Topics.frames, Topics.stats].map((name) => ({ name, partitions: 1 })));
    await local.start();
    await body(local, bus);
  } finally {
    await local.close();
    await runtime.close();
    await bus.close();
  }
}

describe('collaborative processing', () => {
  it('the ingest worker analyzes its frames itself while a backend reports congestion, and only then', async () => {
    const published: Frame[] = [];
    await withLocalAnalysis(1500, async (local, bus) => {
      await bus.consumer({ groupId: 'reader', topics: [Topics.frames] }).run(async (batch) => {
        published.push(...batch.messages.map((m) => frameContract.decode(m.value)));
      });
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
      expect(local.status().localMs).toBeGreaterThan(0);
      // A frame already late still goes where it is done soonest: here, while the backends miss
      // deadlines (reported again, so the report has not expired while the first frame ran).
      await producer.send(Topics.stats, [{ key: 'b1', value: statsContract.encode(congestedStats(0.3)) }]);
      await new Promise((r) => setTimeout(r, 100));
      expect((await local.analyze({ ...frame, captureTimeMs: Date.now() - 10_000 }, source)).local).toHaveLength(1);

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
      await waitFor(() => !local.status().congested && local.status().serverMs === undefined, 'the congestion to pass', { timeoutMs: 5000 });
      expect((await local.analyze({ ...frame, captureTimeMs: Date.now() }, source)).local).toBeUndefined();
      await producer.close();
    });
  }, 60_000);

  it('decides per frame by the paper\'s estimates: network plus server time against what is left of the deadline, local time against both', async () => {
    await withLocalAnalysis(60_000, async (local, bus) => {
      const producer = bus.producer();
      const source = sourceSchema.parse({ id: 'road', path: clip, apps: ['traffic'], speed: 1 });
      const slo = trafficSpec.sloMs;
      const fresh = (): Frame => ({ source: 'road', seq: 0, captureTimeMs: Date.now(), ptsMs: 0, width: 768, height: 432, jpeg });
      /** Backends report this P99 until T_srv (an EWMA over their reports) has come within 1% of it. */
      const report = async (latencyP99Ms: number): Promise<void> => {
        while (Math.abs((local.status().serverMs ?? 0) - latencyP99Ms) > latencyP99Ms / 100) {
          await producer.send(Topics.stats, [{ key: 'b1', value: statsContract.encode(congestedStats(0, 'centernet@2000', latencyP99Ms)) }]);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      };

      // The backends take a tenth of the SLO, on time: the frame goes to them.
      await report(slo / 10);
      expect((await local.analyze(fresh(), source)).local).toBeUndefined();

      // The same backends behind a link that takes the whole SLO for this frame's bytes (T_net): analyzed here.
      local.sent(jpeg.byteLength, 2 * slo);
      const viaSlowLink = await local.analyze(fresh(), source);
      expect(viaSlowLink.local).toHaveLength(1);
      expect(local.status().sendBytesPerMs).toBeCloseTo(jpeg.byteLength / (2 * slo), 6);
      // A fast link again (EWMA 0.3: a few sends bring it back).
      for (let i = 0; i < 30; i++) local.sent(jpeg.byteLength, 0.1);
      expect((await local.analyze(fresh(), source)).local).toBeUndefined();

      // No bad rate, but the backends' P99 is past the SLO (T_srv): analyzed here, as T_loc is shorter.
      await report(3 * slo);
      expect((await local.analyze(fresh(), source)).local).toHaveLength(1);
      expect(local.status().congested).toBe(false);
      // Local runs slower than the backends' estimate: the frame goes to them after all, late or not.
      await report(Math.max(1, local.status().localMs! / 4));
      expect((await local.analyze({ ...fresh(), captureTimeMs: Date.now() - slo }, source)).local).toBeUndefined();
      await producer.close();
    });
  }, 60_000);

  it('a backend takes the detections sent with a frame instead of running its first node', async () => {
    const bus = createMemoryBus();
    const runtime = createOnnxRuntime({ logger: silentLogger() });
    const traffic = createAppLogic(trafficSpec);
    const backend = createBackend({ id: 'b1', bus, runtime, models, apps: [traffic], appsForSource: () => [], batch: 2, logger: silentLogger() });
    const rows: ResultRow[] = [];
    try {
      await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead, ...taskTopics([traffic])].map((name) => ({ name, partitions: 1 })));
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
