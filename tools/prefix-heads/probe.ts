// The child process of `measureMemory`: loads what it is sent, reports its RSS growth, exits.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOnnxRuntime, encodeOnnxModel, loadPrefixBatched, type NamedTensors, type OnnxModel } from '../../analyzers/index.js';
import { silentLogger } from '../../core/index.js';
import type { MemoryFigures, MemoryProbe } from './memory.js';

const MB = 2 ** 20;

/** A model without weights: loading and running it starts onnxruntime, so the baseline includes it. */
const value = { name: 'x', type: { tensorType: { elemType: 1, shape: { dim: [{ dimValue: 1 }] } } } };
const WARM_UP: OnnxModel = {
  irVersion: 8,
  opsetImport: [{ domain: '', version: 17 }],
  graph: { name: 'warm-up', node: [{ opType: 'Identity', input: ['x'], output: ['y'] }], input: [value], output: [{ ...value, name: 'y' }] },
};

async function measure(probe: MemoryProbe): Promise<MemoryFigures> {
  const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1 });
  const scratch = mkdtempSync(join(tmpdir(), 'panoptes-memory-probe-'));
  try {
    const warmUpFile = join(scratch, 'warm-up.onnx');
    writeFileSync(warmUpFile, encodeOnnxModel(WARM_UP));
    const warmUp = await runtime.load({ name: 'warm-up', file: warmUpFile });
    await warmUp.run({ x: { type: 'float32', data: new Float32Array(1), dims: [1] } });

    const baseline = process.memoryUsage.rss();
    // Zeros: what a run allocates does not depend on the pixels.
    const rowLength = probe.rowShape.reduce((a, b) => a * b, 1);
    const images = (name: string): NamedTensors => ({
      [name]: { type: 'float32', data: new Float32Array(probe.rows * rowLength), dims: [probe.rows, ...probe.rowShape] },
    });
    if ('models' in probe) {
      const models = [];
      for (const file of probe.models) models.push(await runtime.load({ name: file, file }));
      const loadMB = (process.memoryUsage.rss() - baseline) / MB;
      for (const model of probe.rows > 0 ? models : []) await model.run(images(model.inputNames[0] ?? ''));
      return { loadMB, peakMB: peakMB(baseline) };
    }
    const model = await loadPrefixBatched(runtime, { name: 'heads', files: probe.split });
    const loadMB = (process.memoryUsage.rss() - baseline) / MB;
    if (probe.rows > 0) await model.run(probe.split.members.map(() => images(model.inputNames[0] ?? '')));
    return { loadMB, peakMB: peakMB(baseline) };
  } finally {
    await runtime.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** `maxRSS` is in KiB and covers the process's whole life; the baseline is taken after start-up. */
const peakMB = (baseline: number): number => (process.resourceUsage().maxRSS * 1024 - baseline) / MB;

process.once('message', (probe: MemoryProbe) => {
  measure(probe).then(
    (figures) => process.send?.(figures, () => process.exit(0)),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
});
