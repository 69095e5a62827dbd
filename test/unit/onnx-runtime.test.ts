import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { frameSelectorModel, FRAME_HIDDEN, FRAME_REFERENCE } from '../../analyzers/cache/index.js';
import { createOnnxRuntime, encodeOnnxModel } from '../../analyzers/index.js';
import { projectRoot, silentLogger } from '../../core/index.js';

const model = join(projectRoot(), 'models/centernet.onnx');

describe('onnxruntime-node adapter (worker threads)', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 2, intraOpThreads: 1 });
  afterAll(() => runtime.close());

  const input = (batch: number, value: number): Float32Array => new Float32Array(batch * 512 * 512 * 3).fill(value);

  it('loads a model and runs batches, a batch of N giving N results', async () => {
    const loaded = await runtime.load({ name: 'centernet', file: model });
    expect(loaded.inputNames).toEqual(['images']);
    expect(loaded.outputNames).toEqual(['detections']);
    const one = await loaded.run({ images: { type: 'float32', data: input(1, 90), dims: [1, 512, 512, 3] } });
    const four = await loaded.run({ images: { type: 'float32', data: input(4, 90), dims: [4, 512, 512, 3] } });
    expect(one.detections?.dims).toEqual([1, 100, 6]);
    expect(four.detections?.dims).toEqual([4, 100, 6]);
    // Every image of the batch matches the single run: batching does not change results.
    const single = Array.from(one.detections!.data as Float32Array);
    const batched = Array.from(four.detections!.data as Float32Array);
    for (let i = 0; i < 4; i++) {
      batched.slice(i * 600, (i + 1) * 600).forEach((v, j) => expect(v).toBeCloseTo(single[j]!, 4));
    }
  });

  it('runs requests from many callers concurrently without mixing their results', async () => {
    const loaded = await runtime.load({ name: 'centernet', file: model });
    const values = [0, 60, 120, 180, 240, 30];
    const alone = await Promise.all(values.map((v) => loaded.run({ images: { type: 'float32', data: input(1, v), dims: [1, 512, 512, 3] } })));
    const again = await Promise.all(values.map((v) => loaded.run({ images: { type: 'float32', data: input(1, v), dims: [1, 512, 512, 3] } })));
    alone.forEach((out, i) => expect(Array.from(again[i]!.detections!.data as Float32Array)).toEqual(Array.from(out.detections!.data as Float32Array)));
  });

  it('times a run on its thread, apart from the batches the threads run meanwhile', async () => {
    const detector = await runtime.load({ name: 'centernet', file: model });
    const dir = mkdtempSync(join(tmpdir(), 'panoptes-onnx-time-'));
    const file = join(dir, 'selector.onnx');
    writeFileSync(file, encodeOnnxModel(frameSelectorModel({ channels: 3, height: 8, width: 8 }, 4, { weights: new Float32Array(12), bias: new Float32Array(2) })));
    const small = await runtime.load({ name: 'selector', file });
    const images = () => ({ images: { type: 'float32' as const, data: input(1, 90), dims: [1, 512, 512, 3] } });
    const detectorMs = await detector.time!(images(), 2);
    // Both threads busy with the detector while the small model is timed: its time is its own.
    const busy = Promise.all([detector.run(images()), detector.run(images()), detector.run(images()), detector.run(images())]);
    const smallMs = await small.time!({ [FRAME_HIDDEN]: { type: 'float32', data: new Float32Array(192), dims: [1, 3, 8, 8] }, [FRAME_REFERENCE]: { type: 'float32', data: new Float32Array(12), dims: [1, 3, 2, 2] } }, 10);
    await busy;
    await Promise.all([small.dispose(), detector.dispose()]);
    rmSync(dir, { recursive: true, force: true });
    expect(smallMs).toBeGreaterThan(0);
    expect(smallMs).toBeLessThan(detectorMs / 10);
  });

  it('BAD CALL: a missing model file is a ModelLoad error naming the file', async () => {
    const missing = join(tmpdir(), 'no-such-model.onnx');
    await expect(runtime.load({ name: 'ghost', file: missing })).rejects.toMatchObject({ code: 'PANOPTES_MODEL_LOAD', message: expect.stringContaining(missing) });
  });

  it('BAD CALL: a file that is not ONNX is a ModelLoad error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'panoptes-onnx-'));
    const file = join(dir, 'garbage.onnx');
    writeFileSync(file, 'not a model');
    await expect(runtime.load({ name: 'garbage', file })).rejects.toMatchObject({ code: 'PANOPTES_MODEL_LOAD' });
    rmSync(dir, { recursive: true, force: true });
  });

  it('BAD CALL: a wrongly shaped input is a ModelRun error, and the runtime keeps working', async () => {
    const loaded = await runtime.load({ name: 'centernet', file: model });
    await expect(loaded.run({ images: { type: 'float32', data: new Float32Array(12), dims: [1, 2, 2, 3] } })).rejects.toMatchObject({ code: 'PANOPTES_MODEL_RUN' });
    const ok = await loaded.run({ images: { type: 'float32', data: input(1, 10), dims: [1, 512, 512, 3] } });
    expect(ok.detections?.dims).toEqual([1, 100, 6]);
  });

  it('BAD CALL: an input whose buffer an earlier run took, or whose values its dims do not hold, is a ModelRun error at once, not a run that never ends', async () => {
    const loaded = await runtime.load({ name: 'centernet', file: model });
    const images = { type: 'float32' as const, data: input(1, 10), dims: [1, 512, 512, 3] };
    await loaded.run({ images });
    // Node drops, without an error, a message that would move a buffer already moved.
    await expect(loaded.run({ images })).rejects.toMatchObject({ code: 'PANOPTES_MODEL_RUN', message: expect.stringContaining('handed to an earlier run') });
    await expect(loaded.run({ images: { type: 'float32', data: input(1, 10), dims: [2, 512, 512, 3] } })).rejects.toMatchObject({
      code: 'PANOPTES_MODEL_RUN',
      message: expect.stringContaining('[2, 512, 512, 3] hold 1572864 values'),
    });
  });
});
