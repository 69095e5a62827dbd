import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import onnxProto from 'onnx-proto';
import { afterAll, describe, expect, it } from 'vitest';
import {
  blockOutputs,
  createOnnxRuntime,
  decodeOnnxModel,
  encodeOnnxModel,
  extractSubgraph,
  groupBySharedPrefix,
  hashGraph,
  readOnnxModel,
  sharedPrefix,
  segmentModel,
  singleTensorCuts,
  splitModel,
  type NamedTensors,
  type OnnxModel,
  type SharedPrefix,
} from '../../analyzers/index.js';
import { projectRoot, silentLogger } from '../../core/index.js';
import { f32, thrown } from '../helpers.js';

const { onnx } = onnxProto;
const { FLOAT } = onnx.TensorProto.DataType;
const CENTERNET = join(projectRoot(), 'models/centernet.onnx');

// ---------------------------------------------------------------------------------------------
// Tiny models: x[N,4] → MatMul w1 → Add b1 → Relu → MatMul w2 → Relu = features[N,8] → a head.
// Head 'a': MatMul wa → Softmax = y[N,3]. Head 'b': MatMul wb → Add bb → Sigmoid = y[N,2].

interface TinyOptions {
  head: 'a' | 'b';
  /** Renames every tensor and node (and lists the initializers in reverse order). */
  rename?: (name: string) => string;
  /** Added to the first value of w2. */
  w2Shift?: number;
  /** Wires Add(b1, h1) instead of Add(h1, b1). */
  swapAdd?: boolean;
  w1Seed?: number;
  softmaxAxis?: number;
  opset?: number;
}

/** Fixed, varied weights: the same for the same seed. */
const weights = (count: number, seed: number): number[] => Array.from({ length: count }, (_, i) => Math.sin(seed * 100 + i * 1.7) / 2);

const BACKBONE_NODES = [0, 1, 2, 3, 4];
/** w1 [4,8], b1 [8], w2 [8,8], float32. */
const BACKBONE_BYTES = (32 + 8 + 64) * 4;

function tinyModel(options: TinyOptions): OnnxModel {
  const { head, rename = (n: string): string => n, w2Shift = 0, swapAdd = false, w1Seed = 1, softmaxAxis = -1, opset = 17 } = options;
  const tensor = (name: string, dims: number[], values: number[]): onnxProto.onnx.ITensorProto => ({
    name: rename(name),
    dims,
    dataType: FLOAT,
    rawData: new Uint8Array(Float32Array.from(values).buffer),
  });
  const value = (name: string, width: number): onnxProto.onnx.IValueInfoProto => ({
    name: rename(name),
    type: { tensorType: { elemType: FLOAT, shape: { dim: [{ dimParam: 'N' }, { dimValue: width }] } } },
  });
  const node = (opType: string, inputs: string[], output: string, attribute: onnxProto.onnx.IAttributeProto[] = []): onnxProto.onnx.INodeProto => ({
    opType,
    name: rename(`${opType}_${output}`),
    input: inputs.map(rename),
    output: [rename(output)],
    attribute,
  });
  const w2 = weights(64, 2);
  w2[0]! += w2Shift;
  const backbone = [
    node('MatMul', ['x', 'w1'], 'h1'),
    node('Add', swapAdd ? ['b1', 'h1'] : ['h1', 'b1'], 'h2'),
    node('Relu', ['h2'], 'h3'),
    node('MatMul', ['h3', 'w2'], 'h4'),
    node('Relu', ['h4'], 'features'),
  ];
  const initializers = [tensor('w1', [4, 8], weights(32, w1Seed)), tensor('b1', [8], weights(8, 9)), tensor('w2', [8, 8], w2)];
  const hidden = ['h1', 'h2', 'h3', 'h4', 'features'].map((name) => value(name, 8));
  const axis = { name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: softmaxAxis };
  const heads = {
    a: {
      nodes: [node('MatMul', ['features', 'wa'], 'logits'), node('Softmax', ['logits'], 'y', [axis])],
      initializers: [tensor('wa', [8, 3], weights(24, 3))],
      hidden: [value('logits', 3)],
      width: 3,
    },
    b: {
      nodes: [node('MatMul', ['features', 'wb'], 'z1'), node('Add', ['z1', 'bb'], 'z2'), node('Sigmoid', ['z2'], 'y')],
      initializers: [tensor('wb', [8, 2], weights(16, 4)), tensor('bb', [2], weights(2, 5))],
      hidden: [value('z1', 2), value('z2', 2)],
      width: 2,
    },
  }[head];
  const allInitializers = [...initializers, ...heads.initializers];
  const model: onnxProto.onnx.IModelProto = {
    irVersion: 8,
    opsetImport: [{ domain: '', version: opset }],
    graph: {
      name: 'tiny',
      node: [...backbone, ...heads.nodes],
      initializer: options.rename ? allInitializers.reverse() : allInitializers,
      input: [value('x', 4)],
      output: [value('y', heads.width)],
      valueInfo: [...hidden, ...heads.hidden],
    },
  };
  // Through bytes, as a model read from a file would be.
  return decodeOnnxModel(onnx.ModelProto.encode(model).finish());
}

const hashes = (model: OnnxModel): string[] => hashGraph(model).nodes.map((n) => n.hash);
const cutNames = (prefix: SharedPrefix): string[][] => prefix.nodes.map((_, i) => prefix.cut.flatMap((c) => c.names[i] ?? []));

describe('structural hashes of ONNX nodes', () => {
  it('do not depend on tensor names, node names or the order of initializers', () => {
    const a = tinyModel({ head: 'a' });
    const renamed = tinyModel({ head: 'a', rename: (n) => `renamed/${n}` });
    expect(hashes(renamed)).toEqual(hashes(a));
    const prefix = sharedPrefix([hashGraph(a), hashGraph(renamed)]);
    expect(prefix.nodes).toEqual([hashes(a).map((_, i) => i), hashes(a).map((_, i) => i)]);
    expect(cutNames(prefix)).toEqual([['y'], ['renamed/y']]);
    expect(prefix.key).toBe(sharedPrefix([hashGraph(a)]).key);
  });

  it('cover the weights: a changed weight changes its node and everything downstream', () => {
    const a = hashes(tinyModel({ head: 'a' }));
    const tweaked = hashes(tinyModel({ head: 'a', w2Shift: 0.25 }));
    expect(tweaked.slice(0, 3)).toEqual(a.slice(0, 3));
    tweaked.slice(3).forEach((hash, i) => expect(hash).not.toBe(a[3 + i]));
  });

  it('cover the wiring: swapping the inputs of Add changes it and everything downstream', () => {
    const a = hashes(tinyModel({ head: 'a' }));
    const swapped = hashes(tinyModel({ head: 'a', swapAdd: true }));
    expect(swapped[0]).toBe(a[0]);
    swapped.slice(1).forEach((hash, i) => expect(hash).not.toBe(a[1 + i]));
  });

  it('cover attributes and the opset version', () => {
    const a = hashes(tinyModel({ head: 'a' }));
    const axis = hashes(tinyModel({ head: 'a', softmaxAxis: 1 }));
    expect(axis.slice(0, -1)).toEqual(a.slice(0, -1));
    expect(axis.at(-1)).not.toBe(a.at(-1));
    const opset13 = hashes(tinyModel({ head: 'a', opset: 13 }));
    opset13.forEach((hash, i) => expect(hash).not.toBe(a[i]));
  });
});

describe('shared prefix of two models', () => {
  const a = hashGraph(tinyModel({ head: 'a' }));
  const b = hashGraph(tinyModel({ head: 'b' }));

  it('is the common backbone of two models with different heads', () => {
    const prefix = sharedPrefix([a, b]);
    expect(prefix.nodes).toEqual([BACKBONE_NODES, BACKBONE_NODES]);
    expect(prefix.cut).toEqual([{ hash: a.tensors.get('features'), names: [['features'], ['features']] }]);
    expect(prefix.parameterBytes).toBe(BACKBONE_BYTES);
    expect(sharedPrefix([b, a]).key).toBe(prefix.key);
  });

  it('stops before the first node whose weights differ', () => {
    const tweaked = hashGraph(tinyModel({ head: 'b', w2Shift: 0.25 }));
    const prefix = sharedPrefix([a, tweaked]);
    expect(prefix.nodes).toEqual([[0, 1, 2], [0, 1, 2]]);
    expect(cutNames(prefix)).toEqual([['h3'], ['h3']]);
    expect(prefix.parameterBytes).toBe((32 + 8) * 4);
    expect(prefix.key).not.toBe(sharedPrefix([a, b]).key);
  });

  it('is empty for models that share no node', () => {
    const prefix = sharedPrefix([a, hashGraph(tinyModel({ head: 'a', w1Seed: 2 }))]);
    expect(prefix).toMatchObject({ nodes: [[], []], cut: [], parameterBytes: 0 });
  });

  it('groups many models by the prefix they share', () => {
    const models = new Map([
      ['a', a],
      ['b', b],
      ['tweaked', hashGraph(tinyModel({ head: 'a', w2Shift: 0.25 }))],
      ['other', hashGraph(tinyModel({ head: 'a', w1Seed: 2 }))],
    ]);
    const whole = groupBySharedPrefix(models, { minParameterBytes: BACKBONE_BYTES });
    expect(whole.map((g) => g.members)).toEqual([['a', 'b'], ['tweaked'], ['other']]);
    expect(whole[0]?.prefix.key).toBe(sharedPrefix([a, b]).key);

    const any = groupBySharedPrefix(models);
    expect(any.map((g) => g.members)).toEqual([['a', 'b', 'tweaked'], ['other']]);
    expect(any[0]?.prefix.nodes).toEqual([[0, 1, 2], [0, 1, 2], [0, 1, 2]]);
  });

  it('BAD CALL: no models is a RangeError', () => {
    expect(() => sharedPrefix([])).toThrow(RangeError);
  });
});

// ---------------------------------------------------------------------------------------------
// Running split models with the project's onnxruntime-node adapter.

const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1 });
afterAll(() => runtime.close());
const scratch = mkdtempSync(join(tmpdir(), 'panoptes-onnx-graph-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let modelCount = 0;

async function run(model: OnnxModel, feeds: NamedTensors): Promise<NamedTensors> {
  const file = join(scratch, `model-${++modelCount}.onnx`);
  writeFileSync(file, encodeOnnxModel(model));
  const loaded = await runtime.load({ name: file, file });
  try {
    // The runtime takes ownership of the feeds' buffers: hand it copies.
    const copies = Object.fromEntries(Object.entries(feeds).map(([name, t]) => [name, { ...t, data: t.data.slice() }]));
    return await loaded.run(copies as NamedTensors);
  } finally {
    await loaded.dispose();
  }
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  return a.reduce((max, v, i) => Math.max(max, Math.abs(v - (b[i] ?? NaN))), 0);
}

/**
 * Runs the prefix of the first model once, and every model's suffix on its outputs, as prefix
 * batching does; returns each model's output next to what the whole model gives.
 */
async function prefixThenSuffixes(models: OnnxModel[], feeds: NamedTensors): Promise<{ split: NamedTensors; whole: NamedTensors }[]> {
  const prefix = sharedPrefix(models.map(hashGraph));
  const splits = models.map((model, i) => splitModel(model, cutNames(prefix)[i] ?? []));
  const prefixOutputs = await run(splits[0]!.prefix, feeds);
  return Promise.all(
    models.map(async (model, i) => {
      const suffixFeeds: NamedTensors = { ...feeds };
      for (const c of prefix.cut) for (const name of c.names[i] ?? []) suffixFeeds[name] = prefixOutputs[c.names[0]![0]!]!;
      const suffix = splits[i]!.suffix;
      const wanted = new Set(suffix.graph?.input?.map((v) => v.name));
      const split = await run(suffix, Object.fromEntries(Object.entries(suffixFeeds).filter(([name]) => wanted.has(name))));
      return { split, whole: await run(model, feeds) };
    }),
  );
}

describe('prefix and suffix models', () => {
  it('run one prefix and two heads to the same outputs as the two whole models', async () => {
    const x = Float32Array.from(weights(5 * 4, 7), (v) => v * 4);
    const results = await prefixThenSuffixes([tinyModel({ head: 'a' }), tinyModel({ head: 'b' })], { x: { type: 'float32', data: x, dims: [5, 4] } });
    const widths = [3, 2];
    results.forEach(({ split, whole }, i) => {
      expect(split.y?.dims).toEqual([5, widths[i]]);
      expect(maxAbsDiff(f32(split.y!), f32(whole.y!))).toBeLessThan(1e-4);
    });
  });

  it('keep only the nodes and weights each side needs', () => {
    const a = tinyModel({ head: 'a' });
    const { prefix, suffix } = splitModel(a, ['features']);
    expect(prefix.graph?.node?.map((n) => n.opType)).toEqual(['MatMul', 'Add', 'Relu', 'MatMul', 'Relu']);
    expect(prefix.graph?.initializer?.map((t) => t.name)).toEqual(['w1', 'b1', 'w2']);
    expect(prefix.graph?.input?.map((v) => v.name)).toEqual(['x']);
    expect(prefix.graph?.output?.map((v) => v.name)).toEqual(['features']);
    expect(suffix.graph?.node?.map((n) => n.opType)).toEqual(['MatMul', 'Softmax']);
    expect(suffix.graph?.initializer?.map((t) => t.name)).toEqual(['wa']);
    expect(suffix.graph?.input?.map((v) => v.name)).toEqual(['features']);
    expect(suffix.graph?.output?.map((v) => v.name)).toEqual(['y']);
  });

  it('BAD CALL: an output the model does not make is a RangeError naming it', () => {
    expect(() => extractSubgraph(tinyModel({ head: 'a' }), { inputs: [], outputs: ['nope'] })).toThrow(/'nope'/);
    expect(() => extractSubgraph(tinyModel({ head: 'a' }), { inputs: [], outputs: ['nope'] })).toThrow(RangeError);
  });

  it('EXPECTED FAILURE: a cut tensor of unknown type is a ModelLoad error asking for shape inference', () => {
    const a = tinyModel({ head: 'a' });
    a.graph!.valueInfo = [];
    const err = thrown(() => splitModel(a, ['features']));
    expect(err).toMatchObject({ code: 'PANOPTES_MODEL_LOAD', details: { tensor: 'features' } });
    expect(err.message).toMatch(/shape inference/);
  });
});

describe('segments at hidden layers (learned caches)', () => {
  const LITE0 = join(projectRoot(), 'models/efficientnet-lite0.onnx');

  it("cuts EfficientNet-Lite0 at its block outputs into segments that, run one after another, give the model's outputs", async () => {
    const model = await readOnnxModel(LITE0);
    const layers = blockOutputs(model);
    // Block 0 runs into block 1 (no residual sum between them); blocks 1–14 end at their
    // projection or their residual sum; block 15 and the head run to the pooled features.
    expect(layers).toHaveLength(14);
    expect(layers[0]).toBe('_blocks/1/_project_conv/out');
    expect(layers.at(-1)).toBe('_blocks/14/add');
    const cuts = [layers[1]!, layers[6]!, layers[12]!];
    const segments = segmentModel(model, cuts);
    expect(segments.map((s) => s.graph?.output?.map((v) => v.name))).toEqual([[cuts[0]], [cuts[1]], [cuts[2]], ['features', 'probabilities']]);
    expect(segments.reduce((n, s) => n + (s.graph?.node?.length ?? 0), 0)).toBe(model.graph?.node?.length);
    const size = 96;
    const images: NamedTensors = { images: { type: 'float32', data: Float32Array.from(weights(2 * size * size * 3, 3), (v) => (v + 1) * 127), dims: [2, size, size, 3] } };
    const whole = await run(model, images);
    let hidden = await run(segments[0]!, images);
    for (const [k, segment] of segments.slice(1).entries()) {
      expect(hidden[cuts[k]!]?.dims.slice(0, 2)).toEqual([2, [24, 80, 192][k]]);
      hidden = await run(segment, { [cuts[k]!]: hidden[cuts[k]!]! });
    }
    expect(maxAbsDiff(f32(hidden.probabilities!), f32(whole.probabilities!))).toBeLessThan(1e-5);
    expect(maxAbsDiff(f32(hidden.features!), f32(whole.features!))).toBeLessThan(1e-4);
  });

  it('EXPECTED FAILURE: a cut that does not alone carry the rest of the model, or cuts out of order, are ModelLoad errors naming it', async () => {
    const model = await readOnnxModel(LITE0);
    // Inside a residual block: the skip connection crosses it too.
    expect(singleTensorCuts(model).map((c) => c.tensor)).not.toContain('_blocks/2/_expand_conv/out');
    expect(thrown(() => segmentModel(model, ['_blocks/2/_expand_conv/out']))).toMatchObject({ code: 'PANOPTES_MODEL_LOAD', details: { tensor: '_blocks/2/_expand_conv/out' } });
    expect(thrown(() => segmentModel(model, ['_blocks/4/add', '_blocks/2/add'])).message).toMatch(/'_blocks\/2\/add' comes before '_blocks\/4\/add'/);
  });
});

describe('model bytes', () => {
  it('EXPECTED FAILURE: bytes that are not ONNX are a ModelLoad error', () => {
    expect(thrown(() => decodeOnnxModel(new TextEncoder().encode('not a model')))).toMatchObject({ code: 'PANOPTES_MODEL_LOAD' });
  });

  it('EXPECTED FAILURE: a node that reads a tensor defined later is a ModelLoad error naming it', () => {
    const a = tinyModel({ head: 'a' });
    a.graph!.node = [...a.graph!.node!].reverse();
    expect(thrown(() => hashGraph(a))).toMatchObject({ code: 'PANOPTES_MODEL_LOAD', details: { tensor: 'logits' } });
  });
});

// ---------------------------------------------------------------------------------------------
// The real CenterNet model.

/** A deep copy with every tensor and node renamed. */
function renamedCopy(model: OnnxModel, rename: (name: string) => string): OnnxModel {
  const copy = decodeOnnxModel(encodeOnnxModel(model));
  const graph = copy.graph!;
  const renameAll = (names: string[] | null | undefined): string[] => (names ?? []).map((n) => (n === '' ? n : rename(n)));
  for (const node of graph.node ?? []) {
    node.name = rename(node.name ?? '');
    node.input = renameAll(node.input);
    node.output = renameAll(node.output);
  }
  for (const item of [...(graph.initializer ?? []), ...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])]) item.name = rename(item.name ?? '');
  return copy;
}

/** A copy whose last Conv has its first weight changed; returns the indices of the nodes that change. */
function withChangedHead(model: OnnxModel): { model: OnnxModel; changed: Set<number> } {
  const copy = decodeOnnxModel(encodeOnnxModel(model));
  const nodes = copy.graph!.node!;
  const head = nodes.findLast((n) => n.opType === 'Conv')!;
  const weight = copy.graph!.initializer!.find((t) => t.name === head.input![1])!;
  const raw = new Uint8Array(weight.rawData!);
  const view = new DataView(raw.buffer);
  view.setFloat32(0, view.getFloat32(0, true) + 0.5, true);
  weight.rawData = raw;
  // Every node reading the weight, or reading what a changed node wrote, changes.
  const changedTensors = new Set([weight.name ?? '']);
  const changed = new Set<number>();
  nodes.forEach((node, i) => {
    if (!node.input?.some((name) => changedTensors.has(name))) return;
    changed.add(i);
    for (const name of node.output ?? []) changedTensors.add(name);
  });
  return { model: copy, changed };
}

const centernet = await readOnnxModel(CENTERNET);

describe('CenterNet (models/centernet.onnx)', () => {
  const graph = centernet.graph!;
  const allNodes = graph.node!.map((_, i) => i);

  it('shares the whole graph with itself and with a renamed copy', () => {
    const hashed = hashGraph(centernet);
    const itself = sharedPrefix([hashed, hashGraph(centernet)]);
    expect(itself.nodes).toEqual([allNodes, allNodes]);
    expect(cutNames(itself)).toEqual([['detections'], ['detections']]);
    // Every initializer holds its values in raw_data, or has none (an empty Resize roi).
    expect(graph.initializer!.every((t) => t.rawData!.length > 0 || t.dims!.some((d) => Number(d) === 0))).toBe(true);
    const weightBytes = graph.initializer!.reduce((sum, t) => sum + t.rawData!.length, 0);
    expect(itself.parameterBytes).toBe(weightBytes);

    const renamed = sharedPrefix([hashed, hashGraph(renamedCopy(centernet, (n) => `copy/${n}`))]);
    expect(renamed.nodes).toEqual([allNodes, allNodes]);
    expect(cutNames(renamed)).toEqual([['detections'], ['copy/detections']]);
    expect(renamed.key).toBe(itself.key);
  });

  it('stops the prefix at a changed head weight', () => {
    const { model: changedModel, changed } = withChangedHead(centernet);
    const prefix = sharedPrefix([hashGraph(centernet), hashGraph(changedModel)]);
    const unchanged = allNodes.filter((i) => !changed.has(i));
    expect(changed.size).toBeGreaterThan(0);
    expect(prefix.nodes).toEqual([unchanged, unchanged]);
    // The cut: what unchanged nodes write and changed nodes read.
    const written = new Set(unchanged.flatMap((i) => graph.node![i]!.output!));
    const read = [...changed].flatMap((i) => graph.node![i]!.input!).filter((name) => written.has(name));
    expect(cutNames(prefix)[0]?.sort()).toEqual([...new Set(read)].sort());
    expect(cutNames(prefix)[1]).toEqual(cutNames(prefix)[0]);
  });
});
