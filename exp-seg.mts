import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { blockOutputs, createOnnxRuntime, loadSegmentedModel, readOnnxModel } from './analyzers/index.js';
import { loadModelZoo, silentLogger } from './core/index.js';
const spec = loadModelZoo()['efficientnet-lite2']!;
const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1, intraOpThreads: 1 } as never);
const all = blockOutputs(await readOnnxModel(spec.file));
const pickLayers = (n: number) => Array.from({ length: n }, (_, i) => all[Math.floor(((i + 1) * all.length) / (n + 1))]!);
const dir = mkdtempSync(join(tmpdir(), 'seg-'));
const size = spec.inputSize!;
const feeds = () => ({ images: { type: 'float32' as const, dims: [1, size, size, 3], data: new Float32Array(size * size * 3).fill(0.3) } });
const models = await Promise.all([0, 1, 4].map((n) => loadSegmentedModel(runtime, { name: `m${n}`, file: spec.file }, pickLayers(n), join(dir, String(n)))));
console.log(Object.keys((await readOnnxModel(spec.file)).graph?.input ?? {}));
const times: number[][] = models.map(() => []);
for (let r = 0; r < 200; r++) for (const [i, m] of models.entries()) { const t = performance.now(); await m.runAll(feeds()); times[i]!.push(performance.now() - t); }
for (const [i, t] of times.entries()) { t.sort((a, b) => a - b); console.log(`${[0, 1, 4][i]} cuts: p50 ${t[100]!.toFixed(2)} p99 ${t[198]!.toFixed(2)} mean ${(t.reduce((a, b) => a + b) / t.length).toFixed(2)}`); }
await runtime.close();
