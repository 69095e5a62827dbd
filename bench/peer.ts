// `npm run bench -- peer`: the embedded pipeline next to the straightforward way, in one run, on
// the same clip and model: `bench/peers/detect.py` (OpenCV decodes and letterboxes, onnxruntime
// runs CenterNet, rows go to a CSV, one frame at a time). Its virtual environment is created
// from PyPI on first use under `.cache/peer-venv`. Also measured: the model alone at its best
// batch size (batch 1 or 4) on letterboxed frames, with the pipeline's model threads: the
// ceiling of both. `--batch N` sets the pipeline's batch (default: per model from this
// machine's profile, cli/batch-sizes.ts); `--threads N` its model threads (`backend.threads`,
// batches run at once, each on the cores divided among them; default 1).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createOnnxRuntime, decodeJpeg, loadModelRunner, type RgbImage } from '../analyzers/index.js';
import { runDeployment } from '../cli/index.js';
import { compileDeployment, createLogger, deploymentSchema, projectRoot, type CompiledConfig } from '../core/index.js';
import { createFileSource } from '../ingest/index.js';

const execute = promisify(execFile);
const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');
const model = join(root, 'models/centernet.onnx');
const venv = join(root, '.cache/peer-venv');
/** The peer's work as an app: CenterNet on every frame, detections stored (see the file). */
export const DETECT_APP = join(root, 'bench/apps/detect.yaml');
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

async function peerFps(interpreter: string, dir: string): Promise<{ fps: number; frames: number; detections: number }> {
  const { stdout } = await execute(interpreter, [join(root, 'bench/peers/detect.py'), clip, model, join(dir, 'peer.csv')], { maxBuffer: 16 << 20 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as { fps: number; frames: number; detections: number };
}

/**
 * CenterNet alone (the runtime call, no pre- or post-processing) at batch 1 and 4, the faster,
 * with the deployment's model threads each running batches one after another.
 */
async function modelOnlyFps(config: CompiledConfig): Promise<{ fps: number; batch: number }> {
  const threads = config.deployment.backend.threads;
  const images: RgbImage[] = [];
  for await (const frame of createFileSource({ id: 'road', path: clip, speed: 'max', loop: false, logger }).frames()) {
    images.push(await decodeJpeg(frame.jpeg));
    if (images.length === 4) break;
  }
  const runtime = createOnnxRuntime({ logger, workers: threads });
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
function benchConfig(dataDir: string, batch: number | undefined, threads: number | undefined): CompiledConfig {
  const deployment = deploymentSchema.parse({
    apps: [DETECT_APP],
    sources: [{ id: 'road', path: clip, apps: ['detect'], speed: 'max' }],
    backend: { ...(batch ? { batch } : {}), ...(threads ? { threads } : {}) },
  });
  return compileDeployment(deployment, join(root, 'configs/bench.yaml'), { dataDir });
}

async function pipelineFps(config: CompiledConfig): Promise<{ fps: number; frames: number; detections: number }> {
  const summary = await runDeployment(config, { logger });
  return { fps: summary.frames / (summary.processingMs / 1000), frames: summary.frames, detections: summary.detections };
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
    // Peer, pipeline, peer again: a change in machine load shows in both peer runs.
    const peerBefore = await peerFps(interpreter, dir);
    const config = benchConfig(join(dir, 'data'), batch, threads);
    const pipeline = await pipelineFps(config);
    const peerAfter = await peerFps(interpreter, dir);
    const model = await modelOnlyFps(config);
    const peer = (peerBefore.fps + peerAfter.fps) / 2;
    console.log(`peer script (OpenCV + onnxruntime, one frame at a time): ${peerBefore.fps.toFixed(1)} / ${peerAfter.fps.toFixed(1)} frames/s before / after, ${peerBefore.frames} frames, ${peerBefore.detections} detections`);
    console.log(`embedded pipeline: ${pipeline.fps.toFixed(1)} frames/s, ${pipeline.frames} frames, ${pipeline.detections} detections, ${config.deployment.backend.threads} model thread(s)`);
    console.log(JSON.stringify({ pipelineFps: round(pipeline.fps), peerFps: round(peer), ratio: round(pipeline.fps / peer, 3), modelOnlyFps: round(model.fps), modelOnlyBatch: model.batch, threads: config.deployment.backend.threads }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (n: number, digits = 1): number => Number(n.toFixed(digits));
