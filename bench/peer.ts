// `npm run bench -- peer`: the embedded pipeline next to the straightforward way, in one run, on
// the same clip and model: `bench/peers/detect.py` (OpenCV decodes and letterboxes, onnxruntime
// runs CenterNet, rows go to a CSV, one frame at a time). Its virtual environment is created
// from PyPI on first use under `.cache/peer-venv`. Also measured: the model alone at its best
// batch size (batch 1 or 4) on letterboxed frames, with the pipeline's model threads: the
// ceiling of both. `--batch N` sets the pipeline's batch (default: per model from this
// machine's profile, cli/batch-sizes.ts); `--threads N` its model threads (`backend.threads`,
// batches run at once, each on the cores divided among them; default 2 on 2 cores or more). Besides frames per
// second, each side's frames per CPU-second (all its threads, and for the pipeline ingest's
// ffmpeg too): analysis per core, the product's promise, and less moved by other work on a
// shared machine than the wall clock.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createOnnxRuntime, decodeJpeg, loadModelRunner, sameObjects, type RgbImage } from '../analyzers/index.js';
import { modelRuntimeOptions, modelThreads, runDeployment } from '../cli/index.js';
import { compileDeployment, createLogger, deploymentSchema, projectRoot, type CompiledConfig, type Detection } from '../core/index.js';
import { createFileSource } from '../ingest/index.js';

const execute = promisify(execFile);
const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');
const model = join(root, 'models/centernet.onnx');
const venv = join(root, '.cache/peer-venv');
/** The peer's work as an app: CenterNet on every frame, detections stored (see the file). */
export const DETECT_APP = join(root, 'bench/apps/detect.yaml');
/** The same app with a learned cache on its detector. */
export const CACHED_DETECT_APP = join(root, 'bench/apps/detect-cached.yaml');
const python = join(venv, 'bin/python');
const logger = createLogger({ level: 'warn' });
/** Frames the model-alone figure runs per batch size. */
const MODEL_FRAMES = 96;

/** The peer's Python, made on first use; undefined (and why) where Python cannot be had. */
async function peerPython(): Promise<string | { missing: string }> {
  if (existsSync(python)) return python;
  const system = await execute('python3', ['-c', 'import venv, ensurepip'])
    .then(() => 'python3')
    .catch(() => undefined);
  if (!system) return { missing: 'python3 with venv and ensurepip is not installed' };
  console.log(`creating ${venv} from bench/peers/requirements.txt (once)`);
  await execute(system, ['-m', 'venv', venv]);
  await execute(python, ['-m', 'pip', 'install', '--quiet', '-r', join(root, 'bench/peers/requirements.txt')], { maxBuffer: 16 << 20 });
  return python;
}

async function peerFps(interpreter: string, dir: string): Promise<{ fps: number; cpuFps: number; frames: number; detections: number }> {
  const { stdout } = await execute(interpreter, [join(root, 'bench/peers/detect.py'), clip, model, join(dir, 'peer.csv')], { maxBuffer: 16 << 20 });
  const run = JSON.parse(stdout.trim().split('\n').at(-1)!) as { fps: number; frames: number; detections: number; cpuSeconds: number };
  return { ...run, cpuFps: run.frames / run.cpuSeconds };
}

/** CPU seconds used by every thread of this process and by its children that have exited (ingest's ffmpeg). */
function cpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  // Fields 16 and 17 of /proc/self/stat (cutime, cstime), in clock ticks of 1/100 s; the first two fields end at ") ".
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (user + system) / 1e6 + (Number(fields[13]) + Number(fields[14])) / 100;
}

/**
 * CenterNet alone (the runtime call, no pre- or post-processing) at batch 1 and 4, the faster,
 * with the deployment's model threads each running batches one after another.
 */
async function modelOnlyFps(config: CompiledConfig): Promise<{ fps: number; batch: number }> {
  const options = modelRuntimeOptions(config);
  const threads = options.workers;
  const images: RgbImage[] = [];
  for await (const frame of createFileSource({ id: 'road', path: clip, speed: 'max', loop: false, logger }).frames()) {
    images.push(await decodeJpeg(frame.jpeg));
    if (images.length === 4) break;
  }
  const runtime = createOnnxRuntime({ ...options, logger });
  try {
    const runner = await loadModelRunner(config.models.centernet!, runtime);
    const params = runner.parseParams(config.apps.detect!.nodes[0]!.params);
    let best = { fps: 0, batch: 1 };
    for (const batch of [1, 4]) {
      const prepared = () => runner.prepare(images.slice(0, batch), images.slice(0, batch).map(() => params));
      // The input is handed over to the model's thread: one for each run, prepared ahead.
      const inputs = await Promise.all(Array.from({ length: MODEL_FRAMES / batch + threads }, prepared));
      await Promise.all(inputs.splice(0, threads).map((input) => runner.execute(input))); // warm-up
      const started = process.hrtime.bigint();
      await Promise.all(
        Array.from({ length: threads }, async () => {
          for (let input = inputs.pop(); input; input = inputs.pop()) await runner.execute(input);
        }),
      );
      const fps = MODEL_FRAMES / (Number(process.hrtime.bigint() - started) / 1e9);
      console.log(`model alone, batch ${batch}: ${fps.toFixed(1)} frames/s`);
      if (fps > best.fps) best = { fps, batch };
    }
    await runner.dispose();
    return best;
  } finally {
    await runtime.close();
  }
}

/** The bench deployment: every frame of the clip through the detect app, as fast as it goes. */
function benchConfig(dataDir: string, batch: number | undefined, threads: number | undefined, app = DETECT_APP): CompiledConfig {
  const deployment = deploymentSchema.parse({
    apps: [app],
    sources: [{ id: 'road', path: clip, apps: ['detect'], speed: 'max' }],
    backend: { ...(batch ? { batch } : {}), ...(threads ? { threads } : {}) },
  });
  return compileDeployment(deployment, join(root, 'configs/bench.yaml'), { dataDir });
}

/** The run's frames/s, and each frame's detections and exit as stored. */
async function pipelineFps(config: CompiledConfig): Promise<{ fps: number; cpuFps: number; frames: number; detections: number; byFrame: Map<number, StoredFrame> }> {
  const byFrame = new Map<number, StoredFrame>();
  // From the sources' start to every row stored, as the peer counts from its first frame to its CSV's last row.
  let cpu = 0;
  const summary = await runDeployment(config, {
    logger,
    onIngest: () => (cpu = -cpuSeconds()),
    beforeClose: async (sink) => {
      cpu += cpuSeconds();
      for (const row of (await sink.query('SELECT frame_seq, exit FROM frames')).rows) byFrame.set(Number(row['frame_seq']), { exit: String(row['exit']), detections: [] });
      const detections = await sink.query('SELECT frame_seq, class, x1, y1, x2, y2 FROM detections');
      for (const row of detections.rows) {
        byFrame.get(Number(row['frame_seq']))?.detections.push({ className: String(row['class']), classId: 0, score: 1, box: { x1: Number(row['x1']), y1: Number(row['y1']), x2: Number(row['x2']), y2: Number(row['y2']) } });
      }
    },
  });
  return { fps: summary.frames / (summary.processingMs / 1000), cpuFps: summary.frames / cpu, frames: summary.frames, detections: summary.detections, byFrame };
}

interface StoredFrame {
  exit: string;
  detections: Detection[];
}

/** cachedAgreement: the share of frames whose objects are the uncached run's (same class, IoU ≥ 0.5); and the cache's hit rate. */
function agreement(cached: ReadonlyMap<number, StoredFrame>, uncached: ReadonlyMap<number, StoredFrame>): { agreement: number; hitRate: number } {
  let same = 0;
  let hits = 0;
  for (const [seq, frame] of uncached) {
    const other = cached.get(seq);
    if (other && sameObjects(other.detections, frame.detections)) same += 1;
    if (other && other.exit !== 'full') hits += 1;
  }
  return { agreement: same / Math.max(1, uncached.size), hitRate: hits / Math.max(1, uncached.size) };
}

/** `--name N`: a positive integer, or undefined when not given. */
function countArg(args: readonly string[], name: string): number | undefined {
  const at = args.indexOf(name);
  if (at < 0) return undefined;
  const value = Number(args[at + 1]);
  if (!(Number.isInteger(value) && value > 0)) throw new Error(`${name} takes a positive integer, got ${args[at + 1]}`);
  return value;
}

export async function peerBench(args: readonly string[]): Promise<void> {
  const batch = countArg(args, '--batch');
  const threads = countArg(args, '--threads');
  if (!existsSync(clip)) throw new Error(`the peer benchmark needs ${clip} (../shared/footage beside the project)`);
  const interpreter = await peerPython();
  if (typeof interpreter !== 'string') {
    console.log(`peer benchmark skipped: ${interpreter.missing}`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-peer-'));
  try {
    // Peer, pipeline, cached pipeline, peer again: a change in machine load shows in both peer runs.
    const peerBefore = await peerFps(interpreter, dir);
    const config = benchConfig(join(dir, 'data'), batch, threads);
    const pipeline = await pipelineFps(config);
    const cached = await pipelineFps(benchConfig(join(dir, 'data-cached'), batch, threads, CACHED_DETECT_APP));
    const peerAfter = await peerFps(interpreter, dir);
    const { agreement: cachedAgreement, hitRate } = agreement(cached.byFrame, pipeline.byFrame);
    const model = await modelOnlyFps(config);
    const peer = (peerBefore.fps + peerAfter.fps) / 2;
    const peerCpu = (peerBefore.cpuFps + peerAfter.cpuFps) / 2;
    const perCpu = (run: { cpuFps: number }): string => `${run.cpuFps.toFixed(1)} frames per CPU-second`;
    console.log(`peer script (OpenCV + onnxruntime, one frame at a time): ${peerBefore.fps.toFixed(1)} / ${peerAfter.fps.toFixed(1)} frames/s before / after (${perCpu(peerBefore)} / ${perCpu(peerAfter)}), ${peerBefore.frames} frames, ${peerBefore.detections} detections`);
    console.log(`embedded pipeline: ${pipeline.fps.toFixed(1)} frames/s (${perCpu(pipeline)}), ${pipeline.frames} frames, ${pipeline.detections} detections, ${modelThreads(config)} model thread(s)`);
    console.log(`with a learned cache on the detector (learned from the clip as it plays): ${cached.fps.toFixed(1)} frames/s (${perCpu(cached)}), ${cached.detections} detections, ${(100 * hitRate).toFixed(1)}% of frames answered by the cache, ${(100 * cachedAgreement).toFixed(1)}% of frames with the uncached run's objects`);
    console.log(
      JSON.stringify({
        pipelineFps: round(pipeline.fps),
        peerFps: round(peer),
        ratio: round(pipeline.fps / peer, 3),
        modelOnlyFps: round(model.fps),
        modelOnlyBatch: model.batch,
        threads: modelThreads(config),
        cachedPipelineFps: round(cached.fps),
        cachedRatio: round(cached.fps / peer, 3),
        cachedAgreement: round(cachedAgreement, 3),
        cacheHitRate: round(hitRate, 3),
        peerCpuFps: round(peerCpu),
        pipelineCpuFps: round(pipeline.cpuFps),
        cpuRatio: round(pipeline.cpuFps / peerCpu, 3),
        cachedCpuRatio: round(cached.cpuFps / peerCpu, 3),
      }),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (n: number, digits = 1): number => Number(n.toFixed(digits));
