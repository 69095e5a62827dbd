import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createOnnxRuntime } from '../../analyzers/index.js';
import { giveBackTensorBuffer, takeTensorBuffer } from '../../analyzers/runtime/index.js';
import { projectRoot, silentLogger } from '../../core/index.js';

const marked = (buffer: ArrayBuffer, mark: number): ArrayBuffer => (new Float32Array(buffer).fill(mark), buffer);
const isMarked = (buffer: ArrayBuffer, mark: number): boolean => new Float32Array(buffer).every((v) => v === mark);

describe('model input buffers used again', () => {
  it('keeps a given-back buffer of a size asked for, a few of each size, none small', () => {
    const bytes = 200_000;
    // A size never asked for is not kept.
    giveBackTensorBuffer(marked(new ArrayBuffer(bytes + 4), 1));
    expect(isMarked(takeTensorBuffer(bytes + 4), 1)).toBe(false);
    const first = marked(takeTensorBuffer(bytes), 2);
    giveBackTensorBuffer(first);
    expect(takeTensorBuffer(bytes)).toBe(first);
    // At most four of a size.
    const many = Array.from({ length: 6 }, () => marked(takeTensorBuffer(bytes), 3));
    for (const b of many) giveBackTensorBuffer(b);
    const again = Array.from({ length: 6 }, () => takeTensorBuffer(bytes));
    expect(again.filter((b) => many.includes(b))).toHaveLength(4);
    // Small buffers are always fresh.
    const small = takeTensorBuffer(1024);
    giveBackTensorBuffer(small);
    expect(takeTensorBuffer(1024)).not.toBe(small);
  });

  it("gets a run's feeds back from onnxruntime's worker thread for the next batch's input", async () => {
    const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1, intraOpThreads: 1 });
    try {
      const model = await runtime.load({ name: 'lite0', file: join(projectRoot(), 'models/efficientnet-lite0.onnx') });
      const bytes = 96 * 96 * 3 * 4;
      const data = new Float32Array(marked(takeTensorBuffer(bytes), 7.25));
      const outputs = await model.run({ images: { type: 'float32', data, dims: [1, 96, 96, 3] } });
      expect(outputs.probabilities!.dims).toEqual([1, 1000]);
      expect(data.buffer.byteLength).toBe(0); // moved to the worker
      expect(isMarked(takeTensorBuffer(bytes), 7.25)).toBe(true); // and back
      await model.dispose();
    } finally {
      await runtime.close();
    }
  });
});
