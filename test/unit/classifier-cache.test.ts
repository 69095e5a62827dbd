import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClassifierCache } from '../../analyzers/cache/index.js';
import { blockOutputs, cropImage, createOnnxRuntime, decodeJpeg, letterboxBatchNative, loadModelRunner, readOnnxModel, type ModelRunner, type ModelRuntime, type RgbImage } from '../../analyzers/index.js';
import { createHeadTrainer } from '../../analyzers/training/index.js';
import { classifierCacheSchema, loadModelZoo, projectRoot, silentLogger, type NodeOutput } from '../../core/index.js';
import { capturingLogger, f32 } from '../helpers.js';

/**
 * A learned cache on an image classifier node, the whole GATI loop in the runner: recorded
 * requests, exploration, composition, serving with hits leaving the batch, adaptation. The inputs
 * are a few pictures, each cropped a little differently many times: a stream that repeats itself.
 */
describe('a learned cache on an image classifier (efficientnet-lite0)', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  /** The runtimes created beside the model's (for asynchronous lookups), by their threads. */
  const besides: number[] = [];
  const watched: ModelRuntime = { ...runtime, beside: (threads) => (besides.push(threads), runtime.beside!(threads)) };
  const zoo = loadModelZoo();
  const { logger, warnings } = capturingLogger();
  // Pool variants only (small: seconds to train) on one late layer; adaptation scaled down. The
  // lookups asynchronous, on a thread of their own (the app tests run them synchronously).
  const cache = { layers: [10], explore: 52, maxClasses: 6, maxParameters: 20_000, group: 10, sampled: 4, window: 20, period: 20, lookups: 'async' };
  const stream = 'vehicle-kinds/kind/camera-1';
  let runner: ModelRunner;
  let plain: ModelRunner;
  let images: RgbImage[] = [];

  beforeAll(async () => {
    runner = await loadModelRunner(zoo['efficientnet-lite0']!, watched, logger);
    plain = await loadModelRunner(zoo['efficientnet-lite0']!, runtime);
    const dir = join(projectRoot(), 'test/fixtures/images');
    const pictures = await Promise.all(readdirSync(dir).filter((f) => f.endsWith('.jpg')).slice(0, 6).map(async (f) => decodeJpeg(readFileSync(join(dir, f)))));
    // Each picture cropped ten ways, a few pixels apart: what a tracked object looks like frame after frame.
    for (let k = 0; k < 10; k++) {
      for (const picture of pictures) {
        const dx = Math.round((picture.width * k) / 150);
        images.push(await cropImage(picture, { x1: dx, y1: k, x2: picture.width - 10 + dx - Math.round((picture.width * 9) / 150), y2: picture.height - 10 + k }));
      }
    }
  }, 60_000);
  afterAll(async () => {
    await runner?.dispose();
    await plain?.dispose();
    await runtime.close();
    images = [];
  });

  const classify = async (model: ModelRunner, batch: readonly RgbImage[], params: readonly object[]): Promise<NodeOutput[]> => {
    const parsed = params.map((p) => model.parseParams(p as Record<string, unknown>));
    return model.finish(await model.execute(await model.prepare(batch, parsed, batch.map(() => stream))));
  };
  const classOf = (output: NodeOutput | undefined) => (output?.kind === 'attributes' ? output.attributes[0]! : undefined);
  /** The model's own answer on each image, without a cache. */
  const whole: NodeOutput[] = [];

  it('records, explores, then answers: a miss is the model\'s answer, a hit its cache\'s at the layer it read; rows and figures say which', async () => {
    // Recording: the model runs segment by segment, whole, every answer its own.
    for (let i = 0; i < images.length; i += 4) whole.push(...(await classify(plain, images.slice(i, i + 4), images.slice(i, i + 4).map(() => ({})))));
    for (let i = 0; i < cache.explore; i += 4) {
      const outputs = await classify(runner, images.slice(i, i + 4), images.slice(i, i + 4).map(() => ({ cache })));
      outputs.forEach((o, j) => {
        expect(o).toMatchObject({ kind: 'attributes', exit: { at: 'full', variant: '' } });
        expect(classOf(o)!.value).toBe(classOf(whole[i + j])!.value);
        expect(classOf(o)!.score).toBeCloseTo(classOf(whole[i + j])!.score, 4);
      });
    }
    // Exploration runs off the requests' path; until it ends, requests run the model whole.
    for (let waited = 0; (runner.cacheStats?.() ?? []).length === 0 && waited < 120; waited++) {
      await classify(runner, images.slice(0, 1), [{ cache }]);
      await new Promise((r) => setTimeout(r, 1000));
    }
    expect(warnings).toEqual([]);
    // The lookups run on a thread of their own, one core.
    expect(besides).toEqual([1]);
    // The request that found the caches serving counts among their figures.
    const before = runner.cacheStats!()[0]!;
    const layer = '_blocks/11/_project_conv/out';
    let [hits, agreed] = [0, 0];
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < images.length; i += 4) {
        // A row without a cache shares the batch, and keeps the model's features for a template.
        const outputs = await classify(runner, images.slice(i, i + 4), [{}, ...images.slice(i + 1, i + 4).map(() => ({ cache }))]);
        expect(outputs[0]).toMatchObject({ kind: 'attributes' });
        expect(outputs[0]).not.toHaveProperty('exit');
        expect((outputs[0] as { features?: Float32Array }).features).toHaveLength(1280);
        outputs.slice(1).forEach((o, j) => {
          const expected = classOf(whole[i + 1 + j])!;
          const exit = o.kind === 'attributes' ? o.exit : undefined;
          if (exit?.at === 'full') {
            expect(classOf(o)!.value).toBe(expected.value);
            expect(classOf(o)!.score).toBeCloseTo(expected.score, 4);
            return;
          }
          expect(exit).toEqual({ at: layer, variant: expect.stringMatching(/^Pool\(\d+\)$/) });
          hits += 1;
          if (classOf(o)!.value === expected.value) agreed += 1;
        });
      }
    }
    // A stream this repetitive is what caches are for: hits, and right ones.
    expect(hits).toBeGreaterThan(0);
    expect(agreed / hits).toBeGreaterThanOrEqual(0.9);
    const stats = runner.cacheStats!();
    expect(stats).toHaveLength(1);
    expect(stats[0]).toMatchObject({ key: stream, layer, hits: before.hits + hits, frames: before.frames + 2 * (images.length - Math.ceil(images.length / 4)) });
    expect(stats[0]!.expectedHitRate).toBeGreaterThan(0);
    expect(stats[0]!.expectedAccuracy).toBeGreaterThanOrEqual(0.97);
    // Adaptation sampled the served requests and retrained the enabled variant, off their path.
    for (let waited = 0; runner.cacheStats!()[0]!.retrains === 0 && waited < 60; waited++) await new Promise((r) => setTimeout(r, 1000));
    const { retrains, failedRetrains } = runner.cacheStats!()[0]!;
    expect(retrains).toBeGreaterThan(0);
    // A retrained version that cannot vouch for its hits on the newest requests is not swapped in.
    expect(failedRetrains).toBeLessThanOrEqual(retrains);
    expect(runner.cacheStats!()[0]!.retrainMs).toBeGreaterThan(0);
    expect(warnings).toEqual([]);
  }, 600_000);

  it('BAD CONFIG: a layer the model does not have, or a detector\'s key, is named', () => {
    expect(() => runner.parseParams({ cache: { layers: [14] } })).toThrow('cache.layers: efficientnet-lite0 has candidate layers 0..13, not 14');
    expect(() => runner.parseParams({ cache: { grid: 8 } })).toThrow(/params\.cache: Unrecognized key: "grid"/);
    expect(() => runner.parseParams({ cache: { group: 10, sampled: 20 } })).toThrow(/sampled must be at most group/);
    expect(classifierCacheSchema.safeParse({ explore: 20 }).success).toBe(false);
  });

  it('stops exploring when disposed: a training job under way fails, and nothing is said of it', async () => {
    const { logger: own, warnings: said } = capturingLogger();
    const stopping = await loadModelRunner(zoo['efficientnet-lite0']!, runtime, own);
    // Conv variants on three layers: minutes of training on a CPU core, were it left to finish.
    const slow = { explore: 52, maxParameters: 1_000_000 };
    for (let i = 0; i < slow.explore; i += 4) await classify(stopping, images.slice(i, i + 4), images.slice(i, i + 4).map(() => ({ cache: slow })));
    await new Promise((r) => setTimeout(r, 3000));
    const started = Date.now();
    await stopping.dispose();
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(said).toEqual([]);
  }, 120_000);

  it('explores again after `reexplore` requests run whole where exploration enabled no cache, waiting twice as long each time', async () => {
    const { logger: own, messages } = capturingLogger('info');
    const again = await loadModelRunner(zoo['efficientnet-lite0']!, runtime, own);
    // No variant fits in 1 KB: every exploration enables none.
    const hopeless = { ...cache, memoryMB: 0.001, reexplore: 8 };
    const explorations = () => messages.filter((m) => m.startsWith('exploring learned caches'));
    const foundNone = () => messages.filter((m) => m.startsWith('no learned cache of efficientnet-lite0 passes'));
    try {
      let i = 0;
      for (const wait of [8, 16]) {
        const before = explorations().length;
        // Requests run whole (the first time, none), then are recorded until exploration starts.
        for (let sent = 0; explorations().length === before && sent < 100; sent++, i = (i + 4) % images.length) {
          const outputs = await classify(again, images.slice(i, i + 4), images.slice(i, i + 4).map(() => ({ cache: hopeless })));
          outputs.forEach((o, j) => expect(classOf(o)!.value).toBe(classOf(whole[i + j])!.value));
        }
        expect(explorations()).toHaveLength(before + 1);
        for (let waited = 0; foundNone().length === before && waited < 240; waited++) await new Promise((r) => setTimeout(r, 500));
        expect(foundNone().length, messages.join('\n')).toBeGreaterThan(before);
        expect(foundNone().at(-1)).toMatch(new RegExp(`explores again after ${wait} requests$`));
      }
      expect(explorations()).toHaveLength(2);
      expect(again.cacheStats?.()).toEqual([]);
    } finally {
      await again.dispose();
    }
  }, 300_000);

  it('stops serving once every cache is wrong on the newest requests, runs the model whole, and explores again', async () => {
    const { logger: own, messages } = capturingLogger('info');
    const spec = zoo['efficientnet-lite0']!;
    const whole = await runtime.load({ name: spec.name, file: spec.file });
    const trainer = createHeadTrainer();
    // The stream changes: from `shifted` on, the model's answer to each picture is another class
    // (its probabilities rolled by one), and retraining cannot follow (its learning rate is 0):
    // every hit of the cache, right before, is wrong now.
    let shifted = false;
    const roll = (p: Float32Array, classes: number) => p.map((_, i) => p[Math.floor(i / classes) * classes + ((i % classes) + classes - 1) % classes]!);
    const config = classifierCacheSchema.parse({ layers: [10], explore: 52, maxClasses: 6, maxParameters: 20_000, group: 10, sampled: 10, window: 120, period: 120, reexplore: 20 });
    const cache = await createClassifierCache({
      runtime,
      model: { name: spec.name, file: spec.file, inputName: 'images', inputSize: 224 },
      whole,
      layers: [blockOutputs(await readOnnxModel(spec.file))[10]!],
      config,
      probabilitiesOf: (outputs) => (shifted ? roll(f32(outputs.probabilities!), 1000) : f32(outputs.probabilities!)),
      train: async (job) => trainer.trainCache(shifted && job.init ? { ...job, learningRate: 0 } : job),
      logger: own,
    });
    const said = (start: string) => messages.filter((m) => m.startsWith(start)).length;
    const batch = async (i: number) => {
      const at = (i * 4) % images.length;
      const { input } = await letterboxBatchNative(images.slice(at, at + 4), 224, spec.name);
      return cache.run(input, [stream, stream, stream, stream]);
    };
    // Exploration, observing and retraining run beside the requests, at the machine's pace: each
    // step gets two minutes of wall time.
    const until = (done: () => boolean, pause: number) => async (i: number) => {
      for (const deadline = Date.now() + 120_000; !done() && Date.now() < deadline; i++) {
        await batch(i);
        await new Promise((r) => setTimeout(r, pause));
      }
      return i;
    };
    try {
      let i = await until(() => said('learned caches of efficientnet-lite0 serve') > 0, 100)(0);
      expect(said('learned caches of efficientnet-lite0 serve'), messages.join('\n')).toBe(1);
      shifted = true;
      i = await until(() => said('every learned cache of efficientnet-lite0 stopped') > 0, 50)(i);
      expect(messages.filter((m) => m.startsWith('every learned cache'))).toEqual(['every learned cache of efficientnet-lite0 stopped meeting the accuracy filter on the newest requests; the model runs whole, and explores again after 20 requests']);
      expect(cache.stats()).toEqual([]);
      // Whole: every answer is the model's own; then recording and an exploration again.
      const explorations = said('exploring learned caches');
      for (const row of await batch(i++)) expect(row.exit).toEqual({ at: 'full', variant: '' });
      await until(() => said('exploring learned caches') > explorations, 0)(i);
      expect(said('exploring learned caches')).toBe(explorations + 1);
    } finally {
      await Promise.all([trainer.close(), cache.close()]);
      await whole.dispose();
    }
  }, 300_000);

  it('runs the model whole, and says so once, for a cache it cannot set up (a stand-in model given the node\'s layers)', async () => {
    const { logger: own, warnings: said } = capturingLogger();
    const standIn = await loadModelRunner(zoo['efficientnet-lite0']!, runtime, own);
    try {
      // As a plan hands a cheaper variant the node's params, parsed for the node's own model.
      const params = [{ cache: classifierCacheSchema.parse({ layers: [17] }) }, { cache: classifierCacheSchema.parse({ layers: [17] }) }];
      for (let round = 0; round < 2; round++) {
        const outputs = await standIn.finish(await standIn.execute(await standIn.prepare(images.slice(0, 2), params, [stream, stream])));
        outputs.forEach((o, i) => expect(classOf(o)).toEqual(classOf(whole[i])));
      }
      expect(said).toEqual(['learned cache of efficientnet-lite0 not set up; its rows run the model whole']);
    } finally {
      await standIn.dispose();
    }
  });

  it('BAD CONFIG: asynchronous lookups on a runtime that cannot run them beside the model run the model whole, and say why', async () => {
    const { logger: own, warnings: said, errors } = capturingLogger();
    const alone = { name: 'alone', lanes: 1, load: runtime.load.bind(runtime), close: async () => {} };
    const noRoom = await loadModelRunner(zoo['efficientnet-lite0']!, alone, own);
    try {
      const params = [{ cache: classifierCacheSchema.parse({ lookups: 'async' }) }];
      const outputs = await noRoom.finish(await noRoom.execute(await noRoom.prepare(images.slice(0, 1), params, [stream])));
      expect(classOf(outputs[0])).toEqual(classOf(whole[0]));
      expect(said).toEqual(['learned cache of efficientnet-lite0 not set up; its rows run the model whole']);
      expect(errors).toEqual(['cache.lookups async: the alone runtime cannot run lookups beside efficientnet-lite0; use sync']);
    } finally {
      await noRoom.dispose();
    }
  });
});
