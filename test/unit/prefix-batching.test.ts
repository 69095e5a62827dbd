import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createOnnxRuntime,
  decodeJpeg,
  loadMergedPrefixBatch,
  loadPrefixBatched,
  mergePrefixBatch,
  readOnnxModel,
  splitAtSharedPrefix,
  type ModelRuntime,
  type NamedTensors,
  type RgbImage,
  type TensorData,
} from '../../analyzers/index.js';
import { preprocessCenternet } from '../../analyzers/models/detector/index.js';
import { projectRoot, silentLogger } from '../../core/index.js';
import { headWeights, measureMemory, writeHeads } from '../../tools/prefix-heads/index.js';
import { f32, thrown } from '../helpers.js';

const FIXTURES = join(projectRoot(), 'test/fixtures/images');
const centernet = await readOnnxModel(join(projectRoot(), 'models/centernet.onnx'));
const scratch = mkdtempSync(join(tmpdir(), 'panoptes-prefix-batching-'));
// Two heads on one backbone: CenterNet as it is, and CenterNet with its last class and box convolutions changed.
const heads = await writeHeads(centernet, scratch, { heads: 2 });

/** Counts each loaded model's runs and the rows (dim 0) of each run. */
function countingRuntime(runtime: ModelRuntime, rows: Map<string, number[]>): ModelRuntime {
  return {
    name: runtime.name,
    lanes: runtime.lanes,
    close: () => runtime.close(),
    async load(model) {
      const loaded = await runtime.load(model);
      return {
        ...loaded,
        run(feeds) {
          rows.set(model.name, [...(rows.get(model.name) ?? []), Object.values(feeds)[0]?.dims[0] ?? 0]);
          return loaded.run(feeds);
        },
        dispose: () => loaded.dispose(),
      };
    },
  };
}

const runs = new Map<string, number[]>();
const runtime = countingRuntime(createOnnxRuntime({ logger: silentLogger(), workers: 1 }), runs);
afterAll(async () => {
  await runtime.close();
  rmSync(scratch, { recursive: true, force: true });
});

const still = (name: string): Promise<RgbImage> => decodeJpeg(readFileSync(join(FIXTURES, name)));
const images = (stills: RgbImage[]): NamedTensors => ({ images: preprocessCenternet(stills).input });

function maxAbsDiff(a: TensorData, b: TensorData): number {
  expect(a.dims).toEqual(b.dims);
  const x = f32(a);
  const y = f32(b);
  return x.reduce((max, v, i) => Math.max(max, Math.abs(v - (y[i] ?? NaN))), 0);
}

describe('the prefix-heads tool', () => {
  it('builds heads that differ only in the last convolutions, and splits them there', () => {
    // CenterNet's class (80 x 128) and box-side (4 x 128) 1x1 convolutions.
    expect(headWeights(centernet).length).toBe(2);
    const wholeBytes = statSync(heads.models[0]!).size;
    expect(statSync(heads.split.prefix).size).toBeGreaterThan(0.99 * wholeBytes);
    for (const { suffix } of heads.split.members) expect(statSync(suffix).size).toBeLessThan(0.01 * wholeBytes);
  });
});

describe('a prefix-batched model (two heads on one backbone)', () => {
  it('runs the prefix once on the union and each suffix on its slice, to what each whole model gives', async () => {
    const [cars, empty, person] = await Promise.all(['road-two-cars.jpg', 'road-empty.jpg', 'room-person.jpg'].map(still));
    const perHead = [
      [cars!, person!],
      [empty!, cars!],
    ];
    const batched = await loadPrefixBatched(runtime, { name: 'two-heads', files: heads.split });
    const outputs = await batched.run(perHead.map(images));
    expect(runs.get('two-heads/prefix')).toEqual([4]);
    expect([runs.get('two-heads/suffix-0'), runs.get('two-heads/suffix-1')]).toEqual([[2], [2]]);

    const whole = await Promise.all(heads.models.map((file) => runtime.load({ name: file, file })));
    for (const [i, model] of whole.entries()) {
      const expected = await model.run(images(perHead[i]!));
      expect(outputs[i]?.detections?.dims).toEqual([2, 100, 6]);
      expect(maxAbsDiff(outputs[i]!.detections!, expected.detections!)).toBeLessThan(1e-4);
    }
    // The heads differ: on the same image (road-two-cars), their detections do.
    const cutRows = (t: TensorData, row: number): TensorData => ({ ...t, dims: [1, 100, 6], data: f32(t).slice(row * 600, (row + 1) * 600) });
    expect(maxAbsDiff(cutRows(outputs[0]!.detections!, 0), cutRows(outputs[1]!.detections!, 1))).toBeGreaterThan(1e-3);
    await Promise.all([batched, ...whole].map((m) => m.dispose()));
  });

  it('runs no suffix for a member without rows, and gives it no outputs', async () => {
    const batched = await loadPrefixBatched(runtime, { name: 'one-asked', files: heads.split });
    const outputs = await batched.run([images([await still('road-empty.jpg')]), images([])]);
    expect(outputs[0]?.detections?.dims).toEqual([1, 100, 6]);
    expect(outputs[1]).toEqual({});
    expect(runs.get('one-asked/suffix-1')).toBeUndefined();
    await batched.dispose();
  });

  it('loads the shared weights once: it takes less memory than the two whole models', async () => {
    // Each in a fresh process: RSS growth from loading, over a baseline with onnxruntime started.
    const rowShape = [512, 512, 3];
    const batched = await measureMemory({ split: heads.split, rows: 0, rowShape });
    const separate = await measureMemory({ models: heads.models, rows: 0, rowShape });
    const backboneMB = statSync(heads.split.prefix).size / 2 ** 20;
    expect(batched.loadMB).toBeLessThan(separate.loadMB);
    // By about one backbone's weights, not by noise.
    expect(separate.loadMB - batched.loadMB).toBeGreaterThan(0.5 * backboneMB);
  });

  it('BAD CALL: feeds for a different number of members is a RangeError', async () => {
    const batched = await loadPrefixBatched(runtime, { name: 'bad-call', files: heads.split });
    await expect(batched.run([images([])])).rejects.toThrow(RangeError);
    await batched.dispose();
  });

  it('as one graph (prefix, a Split, each suffix behind an If): one run gives what each whole model gives, and nothing for a member without rows', async () => {
    const [cars, empty, person] = await Promise.all(['road-two-cars.jpg', 'road-empty.jpg', 'room-person.jpg'].map(still));
    const models = await Promise.all(heads.models.map((file) => readOnnxModel(file)));
    const merged = await loadMergedPrefixBatch(runtime, 'merged', mergePrefixBatch(splitAtSharedPrefix(models)), join(scratch, 'merged'));
    const perHead = [[cars!, person!, empty!], [cars!]];
    const outputs = await merged.run(perHead.map(images));
    expect(runs.get('merged')).toEqual([4]);
    const whole = await Promise.all(heads.models.map((file) => runtime.load({ name: file, file })));
    for (const [i, model] of whole.entries()) {
      const expected = await model.run(images(perHead[i]!));
      expect(outputs[i]?.detections?.dims).toEqual([perHead[i]!.length, 100, 6]);
      expect(maxAbsDiff(outputs[i]!.detections!, expected.detections!)).toBeLessThan(1e-4);
    }
    const alone = await merged.run([images([]), images([person!])]);
    expect(alone[0]).toEqual({});
    expect(maxAbsDiff(alone[1]!.detections!, (await whole[1]!.run(images([person!]))).detections!)).toBeLessThan(1e-4);
    await Promise.all([merged, ...whole].map((m) => m.dispose()));
  });

  it('EXPECTED FAILURE: members fed by different inputs are a ModelLoad error', () => {
    const graph = centernet.graph!;
    const renamed = { ...centernet, graph: { ...graph, input: graph.input!.map((v) => ({ ...v, name: `other/${v.name}` })) } };
    expect(thrown(() => splitAtSharedPrefix([centernet, renamed]))).toMatchObject({ code: 'PANOPTES_MODEL_LOAD' });
  });
});
