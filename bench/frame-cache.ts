// `npm run bench -- frame-cache [--layers 2,3,4,5] [--grids 64,256] [--max-age N] [--threads N] [--prior on|off|both]`: the
// detector's learned cache (docs/learned-caches.md) on CenterNet over every frame of
// car-detection.mp4, one stream, batch 1, for each candidate layer and grid: the frame cache
// learns online from the clip as it plays (starting from the shipped prior where it was learned
// for that layer and grid, and with no selector without it), and each frame's objects are compared with the detector's
// own on that frame (same class, IoU ≥ 0.5). The detector alone runs the same frames before and
// after each cached pass, so a change in machine load shows in both. The exploration table of
// GATI's Table 4, for a detector.
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOnnxRuntime, decodeJpeg, loadModelRunner, sameObjects, type ModelRunner, type RgbImage } from '../analyzers/index.js';
import { compileDeployment, createLogger, deploymentSchema, projectRoot, type Detection, type NodeOutput } from '../core/index.js';
import { createFileSource } from '../ingest/index.js';
import { CACHED_DETECT_APP } from './peer.js';

const logger = createLogger({ level: 'warn' });
const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');

interface Pass {
  layer: number;
  prior: boolean;
  tensor: string;
  grid: number;
  hitRate: number;
  agreement: number;
  /** Share of hits that were right. */
  hitAccuracy: number;
  cachedMsPerFrame: number;
  baseMsPerFrame: number;
  speedup: number;
  retrains: number;
  retrainMs: number;
}

const listArg = (args: readonly string[], name: string, fallback: number[]): number[] => {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const values = (args[at + 1] ?? '').split(',').map(Number);
  if (values.length === 0 || values.some((v) => !Number.isInteger(v) || v < 0)) throw new Error(`${name} takes a comma-separated list of integers, got ${args[at + 1]}`);
  return values;
};

const detectionsOf = (output: NodeOutput | undefined): Extract<NodeOutput, { kind: 'detections' }> => {
  if (output?.kind !== 'detections') throw new Error(`the detector answered ${output?.kind ?? 'nothing'}`);
  return output;
};

export async function frameCacheBench(args: readonly string[]): Promise<void> {
  if (!existsSync(clip)) throw new Error(`the frame-cache benchmark needs ${clip} (../shared/footage beside the project)`);
  const layers = listArg(args, '--layers', [2, 3, 4, 5]);
  const grids = listArg(args, '--grids', [64, 256]);
  const maxAge = args.includes('--max-age') ? listArg(args, '--max-age', [])[0] : undefined;
  const threads = listArg(args, '--threads', [1])[0] ?? 1;
  const priorArg = args.includes('--prior') ? args[args.indexOf('--prior') + 1] : 'both';
  if (!['on', 'off', 'both'].includes(priorArg ?? '')) throw new Error(`--prior takes on, off or both, got ${priorArg}`);
  const priors = priorArg === 'both' ? [false, true] : [priorArg === 'on'];
  const config = compileDeployment(
    deploymentSchema.parse({ apps: [CACHED_DETECT_APP], sources: [{ id: 'road', path: clip, apps: ['detect'] }] }),
    join(root, 'configs/bench.yaml'),
    { dataDir: join(tmpdir(), 'panoptes-bench-frame-cache') },
  );
  const node = config.apps.detect!.nodes[0]!;
  const images: RgbImage[] = [];
  for await (const frame of createFileSource({ id: 'road', path: clip, speed: 'max', loop: false, logger }).frames()) images.push(await decodeJpeg(frame.jpeg));

  // One onnxruntime thread by default: the detector and its cache on one core.
  const runtime = createOnnxRuntime({ logger, workers: 1, intraOpThreads: threads });
  let runner: ModelRunner | undefined;
  try {
    runner = await loadModelRunner(config.models.centernet!, runtime);
    const plain = runner.parseParams(node.params);
    const base = async (): Promise<{ ms: number; answers: Detection[][] }> => {
      const started = performance.now();
      const answers: Detection[][] = [];
      for (const image of images) answers.push(detectionsOf((await runner!.run([image], [plain]))[0]).detections);
      return { ms: performance.now() - started, answers };
    };
    await base(); // warm-up
    const passes: Pass[] = [];
    for (const layer of layers) {
      for (const grid of grids) {
        for (const prior of priors) {
          const before = await base();
          const params = runner.parseParams({ ...node.params, cache: { ...node.cache, layer, grid, prior, ...(maxAge ? { maxAge } : {}) } });
          const stream = `detect/detect/layer-${layer}-grid-${grid}-prior-${prior}`;
          let same = 0;
          let hits = 0;
          let rightHits = 0;
          let tensor = '';
          const started = performance.now();
          for (const [i, image] of images.entries()) {
            const output = detectionsOf((await runner.finish(await runner.execute(await runner.prepare([image], [params], [stream]))))[0]);
            const agrees = sameObjects(output.detections, before.answers[i]!);
            if (agrees) same += 1;
            if (output.exit && output.exit.at !== 'full') {
              hits += 1;
              tensor = output.exit.at;
              if (agrees) rightHits += 1;
            }
          }
          const cachedMs = performance.now() - started;
          const after = await base();
          const stats = runner.cacheStats?.().find((s) => s.key === stream);
          const baseMs = (before.ms + after.ms) / 2;
          const pass: Pass = {
            layer,
            prior,
            tensor: stats?.layer ?? tensor,
            grid,
            hitRate: round(hits / images.length, 3),
            agreement: round(same / images.length, 3),
            hitAccuracy: round(hits === 0 ? 0 : rightHits / hits, 3),
            cachedMsPerFrame: round(cachedMs / images.length, 2),
            baseMsPerFrame: round(baseMs / images.length, 2),
            speedup: round(baseMs / cachedMs, 3),
            retrains: stats?.retrains ?? 0,
            retrainMs: round(stats?.retrainMs ?? 0, 0),
          };
          console.log(
            `layer ${layer} (${pass.tensor}), grid ${grid}, prior ${prior ? 'on' : 'off'}: ${(100 * pass.hitRate).toFixed(1)}% hits, ${(100 * pass.hitAccuracy).toFixed(1)}% of them right, ` +
              `agreement ${pass.agreement}, ${pass.cachedMsPerFrame} ms/frame against ${pass.baseMsPerFrame} (${pass.speedup}×), ${pass.retrains} retrainings in ${pass.retrainMs} ms`,
          );
          passes.push(pass);
        }
      }
    }
    console.log(JSON.stringify({ frames: images.length, passes }));
  } finally {
    await runner?.dispose();
    await runtime.close();
  }
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));
