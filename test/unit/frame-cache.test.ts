import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frameSelectorModel, FRAME_HIDDEN, FRAME_POOLED, FRAME_PROBABILITIES, FRAME_REFERENCE } from '../../analyzers/cache/index.js';
import { frameChange } from '../../analyzers/cache/frame-selector.js';
import { createOnnxRuntime, cropImage, decodeJpeg, encodeOnnxModel, framePriorFile, loadModelRunner, readFramePrior, sameObjects, type ModelRunner, type RgbImage } from '../../analyzers/index.js';
import { compileDeployment, deploymentSchema, projectRoot, seededRandom, silentLogger, type Detection, type NodeOutput } from '../../core/index.js';
import { createFileSource } from '../../ingest/index.js';
import { f32 } from '../helpers.js';

const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');
const box = (x1: number, y1: number, x2: number, y2: number) => ({ x1, y1, x2, y2 });
const detection = (className: string, b: ReturnType<typeof box>): Detection => ({ className, classId: 0, score: 0.9, box: b });

describe('sameObjects', () => {
  const car = detection('car', box(0, 0, 10, 10));
  it('matches objects one to one by class and IoU ≥ 0.5, in any order', () => {
    const truck = detection('truck', box(20, 20, 30, 30));
    expect(sameObjects([car, truck], [detection('truck', box(21, 21, 31, 31)), detection('car', box(1, 0, 11, 10))])).toBe(true);
    expect(sameObjects([], [])).toBe(true);
  });
  it('tells a moved, renamed, new or doubled object apart', () => {
    expect(sameObjects([car], [detection('car', box(6, 0, 16, 10))])).toBe(false);
    expect(sameObjects([car], [detection('truck', box(0, 0, 10, 10))])).toBe(false);
    expect(sameObjects([car], [])).toBe(false);
    expect(sameObjects([car, car], [car, detection('car', box(50, 50, 60, 60))])).toBe(false);
  });
});

describe('the frame cache selector in onnxruntime', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1, intraOpThreads: 1 });
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-frame-selector-'));
  afterAll(async () => {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('pools a grid, and its change and probabilities are what training and the selector compute', async () => {
    const shape = { channels: 3, height: 8, width: 8 };
    const random = seededRandom(3);
    const weights = Float32Array.from({ length: 12 }, () => random() - 0.5);
    const bias = Float32Array.from([0.1, -0.2]);
    const file = join(dir, 'selector.onnx');
    writeFileSync(file, encodeOnnxModel(frameSelectorModel(shape, 4, { weights, bias })));
    const model = await runtime.load({ name: 'selector', file });
    const hidden = Float32Array.from({ length: 2 * 3 * 64 }, () => random() * 4);
    const reference = Float32Array.from({ length: 2 * 3 * 4 }, () => random() * 4);
    const out = await model.run({
      [FRAME_HIDDEN]: { type: 'float32', data: hidden.slice(), dims: [2, 3, 8, 8] },
      [FRAME_REFERENCE]: { type: 'float32', data: reference.slice(), dims: [2, 3, 2, 2] },
    });
    const pooled = f32(out[FRAME_POOLED]!);
    // Cell (0, 0) of channel 1 of row 1: the mean of its 4×4 window.
    let sum = 0;
    for (let y = 0; y < 4; y++) for (let x = 0; x < 4; x++) sum += hidden[64 * 3 + 64 + y * 8 + x]!;
    expect(pooled[12 + 4]).toBeCloseTo(sum / 16, 4);
    for (let row = 0; row < 2; row++) {
      const change = frameChange(pooled.slice(row * 12, (row + 1) * 12), reference.slice(row * 12, (row + 1) * 12), 3);
      const logits = [0, 1].map((k) => bias[k]! + change.reduce((s, v, i) => s + v * weights[i * 2 + k]!, 0));
      const p1 = 1 / (1 + Math.exp(logits[0]! - logits[1]!));
      expect(f32(out[FRAME_PROBABILITIES]!)[row * 2 + 1]).toBeCloseTo(p1, 4);
    }
    await model.dispose();
  });
});

describe.skipIf(!existsSync(clip))('a frame cache on CenterNet over car-detection.mp4', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1, intraOpThreads: 2 });
  let runner: ModelRunner;
  let frames: RgbImage[];
  const config = compileDeployment(
    deploymentSchema.parse({ apps: [join(root, 'bench/apps/detect-cached.yaml')], sources: [{ id: 'road', path: clip, apps: ['detect'] }] }),
    join(root, 'configs/test.yaml'),
    { dataDir: join(tmpdir(), 'panoptes-frame-cache-unused') },
  );
  const node = config.apps.detect!.nodes[0]!;
  // Scaled down to learn within the test's 150 frames.
  const cache = { ...node.cache!, minPairs: 20, period: 20, verifyRate: 0.2 };

  beforeAll(async () => {
    runner = await loadModelRunner(config.models.centernet!, runtime);
    frames = [];
    for await (const frame of createFileSource({ id: 'road', path: clip, fps: 5, speed: 'max', loop: false, logger: silentLogger() }).frames()) frames.push(await decodeJpeg(frame.jpeg));
  }, 60_000);
  afterAll(async () => {
    await runner.dispose();
    await runtime.close();
  });

  it('answers every frame with the model’s own objects or those of the stream’s last frame it ran on, and learns to hit', async () => {
    const plain = runner.parseParams(node.params);
    const cached = runner.parseParams({ ...node.params, cache });
    const base: Detection[][] = [];
    for (const image of frames) base.push(((await runner.run([image], [plain]))[0] as Extract<NodeOutput, { kind: 'detections' }>).detections);

    let reference: Detection[] | undefined;
    let hits = 0;
    for (const [i, image] of frames.entries()) {
      const [output] = await runner.finish(await runner.execute(await runner.prepare([image], [cached], ['detect/detect/road'])));
      const { detections, exit } = output as Extract<NodeOutput, { kind: 'detections' }>;
      expect(exit?.variant).toMatch(/^Pool/);
      if (exit?.at === 'full') {
        expect(detections).toEqual(base[i]);
        reference = detections;
      } else {
        expect(exit?.at).toMatch(/expanded_conv/);
        expect(detections).toEqual(reference);
        hits += 1;
      }
    }
    const [stats] = runner.cacheStats!();
    expect(stats).toMatchObject({ key: 'detect/detect/road', frames: frames.length, hits });
    expect(stats!.retrains).toBeGreaterThan(0);
    // Sampled at 5 fps, frames differ more than at 12.5: a tenth is far from the 0 of a cache that never learns.
    expect(hits).toBeGreaterThan(frames.length / 10);
  }, 120_000);

  it('starts from the selector shipped beside the model: it hits before its own first training, and only on the grid it was learned on', async () => {
    // Never trained here: whatever hits comes from the prior.
    const hitsUntrained = async (prior: boolean, grid: number): Promise<{ hits: number; expectedHitRate: number }> => {
      const params = runner.parseParams({ ...node.params, cache: { ...cache, prior, grid, minPairs: 100_000, period: 100_000 } });
      const stream = `detect/detect/prior-${prior}-grid-${grid}`;
      let hits = 0;
      for (const image of frames.slice(0, 40)) {
        const [output] = await runner.finish(await runner.execute(await runner.prepare([image], [params], [stream])));
        if ((output as Extract<NodeOutput, { kind: 'detections' }>).exit?.at !== 'full') hits += 1;
      }
      const stats = runner.cacheStats!().find((s) => s.key === stream)!;
      expect(stats.retrains).toBe(0);
      return { hits, expectedHitRate: stats.expectedHitRate };
    };
    expect(await hitsUntrained(false, 64)).toEqual({ hits: 0, expectedHitRate: 0 });
    expect(await hitsUntrained(true, 256)).toEqual({ hits: 0, expectedHitRate: 0 });
    const withPrior = await hitsUntrained(true, 64);
    // The clip's first seconds are an empty road (sampled at 5 fps here, frames change more than the prior's pairs mostly did: it hits seldom).
    expect(withPrior.hits).toBeGreaterThan(0);
    expect(withPrior.expectedHitRate).toBeGreaterThan(0.2);
  }, 120_000);

  it('keeps serving the prior while its own selector cannot vouch for its hits', async () => {
    const prior = (await readFramePrior(framePriorFile(config.models.centernet!.file)))!;
    // Wrong hits weighted a thousand to one: the node's own selector hardly ever says "same", too seldom to vouch for its hits.
    const params = runner.parseParams({ ...node.params, cache: { ...cache, falsePositiveWeight: 1000 } });
    const stream = 'detect/detect/prior-kept';
    for (const image of frames) {
      await runner.finish(await runner.execute(await runner.prepare([image], [params], [stream])));
      const stats = runner.cacheStats!().find((s) => s.key === stream)!;
      if (stats.retrains > 0) {
        expect(stats.expectedHitRate).toBe(prior.expectedHitRate);
        return;
      }
    }
    throw new Error('the cache never retrained on the clip');
  }, 120_000);

  it("never reuses a reference of another frame size: its boxes are mapped through that size's letterbox", async () => {
    const cached = runner.parseParams({ ...node.params, cache });
    const last = frames.at(-1)!;
    const exitOf = async (image: RgbImage): Promise<string | undefined> =>
      ((await runner.finish(await runner.execute(await runner.prepare([image], [cached], ['detect/detect/road']))))[0] as Extract<NodeOutput, { kind: 'detections' }>).exit?.at;
    // The stream learned above; the same frame again, twice, leaves a stable reference of this size.
    await exitOf(last);
    await exitOf(last);
    const smaller = cropImage(last, { x1: 0, y1: 0, x2: last.width - 64, y2: last.height - 36 });
    expect(await exitOf(smaller)).toBe('full');
  }, 60_000);

  it('serves two batches that start at once as a new cache’s first, as on two model threads', async () => {
    // Another config: a cache of its own, never run before.
    const params = runner.parseParams({ ...node.params, cache: { ...cache, period: 21 } });
    const run = async (image: RgbImage, stream: string) => runner.finish(await runner.execute(await runner.prepare([image], [params], [stream])));
    const outputs = await Promise.all([run(frames[0]!, 'detect/detect/first-a'), run(frames[1]!, 'detect/detect/first-b')]);
    expect(outputs.map(([o]) => (o as Extract<NodeOutput, { kind: 'detections' }>).exit?.at)).toEqual(['full', 'full']);
  }, 60_000);

  it("on two model threads, answers a stream's frames with their own objects or those of an earlier frame the model ran on", async () => {
    const twoThreads = createOnnxRuntime({ logger: silentLogger(), workers: 2, intraOpThreads: 1 });
    const parallel = await loadModelRunner(config.models.centernet!, twoThreads);
    try {
      const detectionsOf = (output: NodeOutput | undefined) => output as Extract<NodeOutput, { kind: 'detections' }>;
      // Each frame three times over: a frame like its reference, so that some hit (at 5 fps the prior's hits are rare).
      const some = frames.slice(0, 14).flatMap((frame) => [frame, frame, frame]);
      const plain = parallel.parseParams(node.params);
      const base: Detection[][] = [];
      for (const image of some) base.push(detectionsOf((await parallel.run([image], [plain]))[0]).detections);
      const params = parallel.parseParams({ ...node.params, cache });
      const execute = async (k: number) => parallel.execute(await parallel.prepare([some[k]!], [params], ['detect/detect/two-threads']));
      const ranWhole: number[] = [];
      for (let k = 0; k < some.length; k += 2) {
        // Two batches of the stream at once, one on each thread, the later one finished first.
        const [earlier, later] = await Promise.all([execute(k), execute(k + 1)]);
        const laterOutput = detectionsOf((await parallel.finish(later))[0]);
        const outputs = [detectionsOf((await parallel.finish(earlier))[0]), laterOutput];
        for (const [i, output] of outputs.entries()) {
          const frame = k + i;
          if (output.exit?.at === 'full') {
            expect(output.detections).toEqual(base[frame]);
            ranWhole.push(frame);
          } else expect(ranWhole.filter((earlier) => earlier < frame).map((earlier) => base[earlier])).toContainEqual(output.detections);
        }
      }
      // 17 of 42 hit; 8 where a frame answered before the one before it never became a reference that serves.
      expect(some.length - ranWhole.length).toBeGreaterThan(some.length / 4);
      expect(parallel.cacheStats!()).toEqual([expect.objectContaining({ key: 'detect/detect/two-threads', frames: some.length })]);
    } finally {
      await parallel.dispose();
      await twoThreads.close();
    }
  }, 120_000);

  it('refuses a cache on a layer the model does not have, when the node is checked', () => {
    expect(() => runner.parseParams({ ...node.params, cache: { ...cache, layer: 99 } })).toThrow('cache.layer 99: centernet has candidate layers 0..7');
  });

  it('keeps streams apart, and runs rows of no stream whole', async () => {
    const cached = runner.parseParams({ ...node.params, cache });
    const plain = runner.parseParams(node.params);
    const [first, withoutStream] = await runner.finish(await runner.execute(await runner.prepare([frames[0]!, frames[1]!], [cached, cached], ['detect/detect/other', undefined])));
    // A stream it never saw has no reference: the model runs.
    expect((first as Extract<NodeOutput, { kind: 'detections' }>).exit?.at).toBe('full');
    expect((withoutStream as Extract<NodeOutput, { kind: 'detections' }>).exit).toBeUndefined();
    const [again] = await runner.finish(await runner.execute(await runner.prepare([frames[1]!], [plain], ['detect/detect/other'])));
    expect((again as Extract<NodeOutput, { kind: 'detections' }>).exit).toBeUndefined();
    expect(runner.cacheStats!().map((s) => s.key)).toEqual(expect.arrayContaining(['detect/detect/other', 'detect/detect/road']));
  }, 60_000);
});
