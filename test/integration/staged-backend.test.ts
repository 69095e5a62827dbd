import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createBackend, createOnnxRuntime, taskTopics, type ModelRuntime } from '../../analyzers/index.js';
import { createAppLogic } from '../../apps/index.js';
import { createMemoryBus, frameContract, loadApp, loadModelZoo, projectRoot, resultRowContract, silentLogger, Topics, type ResultRow } from '../../core/index.js';
import { waitFor } from '../conformance/wait-for.js';

// `backend.batching: on-time` with `stages: 3`: the detector cut into three stages, Our-Tardy
// choosing each step, answers every frame as the whole model does.
const root = projectRoot();
const images = ['room-person', 'road-two-cars', 'road-empty'].map((name) => readFileSync(join(root, `test/fixtures/images/${name}.jpg`)));
const FRAMES = 9;

describe('a backend running its models in stages', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  afterAll(() => runtime.close());

  /** The detection rows of FRAMES frames through a backend with `stages`, and the model files it loaded. */
  async function detections(stages: number): Promise<{ rows: ResultRow[]; loaded: string[] }> {
    const models = loadModelZoo();
    const traffic = createAppLogic(loadApp(join(root, 'configs/apps/traffic.yaml'), models));
    const bus = createMemoryBus();
    const loaded: string[] = [];
    const watched: ModelRuntime = { ...runtime, lanes: runtime.lanes, load: async (model) => (loaded.push(model.name), runtime.load(model)) };
    const backend = createBackend({ id: `staged-${stages}`, bus, runtime: watched, models, apps: [traffic], appsForSource: () => ['traffic'], batching: 'tardy', stages, batch: 4, logger: silentLogger() });
    const rows: ResultRow[] = [];
    try {
      await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead, ...taskTopics([traffic])].map((name) => ({ name, partitions: 1 })));
      await backend.start();
      await bus.consumer({ groupId: 'observer', topics: [Topics.results] }).run(async (batch) => {
        rows.push(...batch.messages.map((m) => resultRowContract.decode(m.value)));
      });
      // Replayed footage (the backfill topic): delay-tolerant, so a loaded machine drops none of it.
      await bus.producer().send(
        Topics.backfillFrames,
        Array.from({ length: FRAMES }, (_, seq) => ({ key: 'cam', value: frameContract.encode({ source: 'cam', seq, captureTimeMs: Date.now(), ptsMs: seq * 100, width: 768, height: 432, jpeg: images[seq % images.length]! }) })),
      );
      await waitFor(() => rows.filter((r) => r.table === 'frames').length === FRAMES, `${FRAMES} frames analyzed`, { timeoutMs: 60_000 });
    } finally {
      await backend.close();
      await bus.close();
    }
    const order = (a: ResultRow, b: ResultRow): number =>
      Number(a.fields.frame_seq) - Number(b.fields.frame_seq) || String(a.fields.class).localeCompare(String(b.fields.class)) || Number(a.fields.x1) - Number(b.fields.x1);
    return { rows: rows.filter((r) => r.table === 'detections').sort(order), loaded };
  }

  it('stores the same detections as the whole model, from the model cut into stages', async () => {
    const whole = await detections(1);
    const staged = await detections(3);
    expect(whole.rows.length).toBeGreaterThan(0);
    // The same objects in the same frames; scores and boxes as close as onnxruntime's two graphs allow.
    expect(staged.rows.map((r) => [r.fields.frame_seq, r.fields.class])).toEqual(whole.rows.map((r) => [r.fields.frame_seq, r.fields.class]));
    staged.rows.forEach((r, i) => {
      const want = whole.rows[i]!.fields;
      expect(Number(r.fields.score)).toBeCloseTo(Number(want.score), 3);
      for (const side of ['x1', 'y1', 'x2', 'y2']) expect(Math.abs(Number(r.fields[side]) - Number(want[side]))).toBeLessThan(1);
    });
    expect(whole.loaded.filter((name) => name.startsWith('centernet#'))).toEqual([]);
    expect(staged.loaded.filter((name) => name.startsWith('centernet#'))).toEqual(['centernet#0', 'centernet#1', 'centernet#2']);
  }, 120_000);
});
