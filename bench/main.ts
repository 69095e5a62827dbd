// Benchmarks. Each prints what it measured, ending with one JSON line of figures taken side by
// side in the same run (the machines are shared, so only ratios within one run compare).
//   npm run bench -- pipeline
//   npm run bench -- bus
//   npm run bench -- sink
//   npm run bench -- backend
//   npm run bench -- ingest
//   npm run bench -- peer [--batch N] [--threads N]
//   npm run bench -- soak [--minutes N] [--sources N] [--fps F]
//   npm run bench -- weg [--minutes M] [--workload faces|objects]
//   npm run bench -- cache [--model efficientnet-lite2|faceres] [--explore N] [--inputs N] [--layers K] [--budget-mb M]
//   npm run bench -- cache-misses [--requests N]
//   npm run bench -- colocate [--live-share S]
//   npm run bench -- variants
//   npm run bench -- frame-cache [--layers 2,3,4,5] [--grids 64,256] [--max-age N] [--threads N]
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJpeg, type RgbImage } from '../analyzers/index.js';
import { modelBatches, modelThreads, runDeployment } from '../cli/index.js';
import { compileDeployment, createLogger, deploymentSchema, projectRoot } from '../core/index.js';
import { createFileSource } from '../ingest/index.js';
import { backendBench, rawFps } from './backend.js';
import { busBench } from './bus.js';
import { cacheBench } from './cache.js';
import { cacheMissesBench } from './cache-misses.js';
import { colocateBench } from './colocate.js';
import { frameCacheBench } from './frame-cache.js';
import { ingestBench } from './ingest.js';
import { DETECT_APP, peerBench } from './peer.js';
import { sinkBench } from './sink.js';
import { soakBench } from './soak.js';
import { variantsBench } from './variants.js';
import { wegBench } from './weg.js';

const logger = createLogger({ level: 'warn' });
const clip = join(projectRoot(), '../shared/footage/car-detection.mp4');

async function pipeline(): Promise<void> {
  if (!existsSync(clip)) throw new Error(`the pipeline benchmark needs ${clip} (../shared/footage beside the project)`);
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-bench-'));
  try {
    const deployment = deploymentSchema.parse({
      apps: [DETECT_APP],
      sources: [{ id: 'road', path: clip, apps: ['detect'], speed: 'max' }],
    });
    const config = compileDeployment(deployment, join(projectRoot(), 'configs/bench.yaml'), { dataDir });
    const { batch } = modelBatches(config)('centernet');

    // The same decoded frames the pipeline sees: every frame of the clip, as ingest makes them.
    const images: RgbImage[] = [];
    for await (const frame of createFileSource({ id: 'road', path: clip, speed: 'max', loop: false, logger }).frames()) {
      images.push(await decodeJpeg(frame.jpeg));
    }

    // Detector alone before and after the pipeline, so a change in machine load shows in both.
    const before = await rawFps(images, config);
    const summary = await runDeployment(config, { logger });
    const after = await rawFps(images, config);

    const pipelineFps = summary.frames / (summary.processingMs / 1000);
    const modelOnlyFps = (before + after) / 2;
    console.log(`frames: ${images.length} (${clip}, every frame), batch ${batch}, ${modelThreads(config)} model thread(s)`);
    console.log(`detector alone (pre-processing, model, decoding): ${before.toFixed(1)} frames/s before, ${after.toFixed(1)} after the pipeline`);
    console.log(`embedded pipeline (decode video, bus, JPEG decode, detector, rows, chDB): ${(summary.processingMs / 1000).toFixed(2)} s, ${pipelineFps.toFixed(1)} frames/s, ${summary.detections} detections`);
    console.log(JSON.stringify({ pipelineFps: round(pipelineFps), modelOnlyFps: round(modelOnlyFps), ratio: round(pipelineFps / modelOnlyFps, 3), frames: images.length }));
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const round = (n: number, digits = 1): number => Number(n.toFixed(digits));

/** Each gets the arguments after its name. */
const benchmarks: Record<string, (args: readonly string[]) => Promise<void>> = { pipeline, bus: busBench, sink: sinkBench, backend: backendBench, ingest: ingestBench, peer: peerBench, soak: soakBench, weg: wegBench, cache: cacheBench, 'cache-misses': cacheMissesBench, colocate: colocateBench, 'frame-cache': frameCacheBench, variants: variantsBench };
const name = process.argv[2] ?? '';
const bench = benchmarks[name];
if (!bench) {
  console.error(`usage: npm run bench -- <${Object.keys(benchmarks).join('|')}>`);
  process.exitCode = 1;
} else {
  bench(process.argv.slice(3)).catch((err: unknown) => {
    // A programming error (the soak once failed on one in CI) shows where; a refusal, only why.
    const bug = err instanceof TypeError || err instanceof RangeError || err instanceof ReferenceError;
    console.error(`bench ${name}: ${err instanceof Error ? (bug ? (err.stack ?? err.message) : err.message) : String(err)}`);
    process.exitCode = 1;
  });
}
