// `npm run bench -- ingest`: 1, 4 and 16 concurrent 720p sources through the ingest worker
// (decode, sample at 5 fps, JPEG-encode, publish on the memory bus), next to ffmpeg alone only
// decoding the same inputs, in the same run. `fps` is input frames decoded per second, as the
// ingest worker counted them, so the ratio is what sampling, encoding and publishing cost on
// top of decoding; `sampledFps` and `publishedFps` are the frames that came out.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createMemoryBus, silentLogger, sourceSchema, Topics } from '../core/index.js';
import { createIngest, resolveFfmpegPath } from '../ingest/index.js';

const execute = promisify(execFile);
const COUNTS = [1, 4, 16];
const SECONDS = 10;
const NATIVE_FPS = 25;
const SAMPLED_FPS = 5;

interface Figures {
  count: number;
  /** Input frames decoded per second through the ingest worker. */
  fps: number;
  /** Frames kept by sampling, and published, per second. */
  sampledFps: number;
  publishedFps: number;
  /** Input frames per second ffmpeg alone decodes. */
  ffmpegFps: number;
  ratio: number;
}

/** `count` ffmpegs decoding the clip to nothing at once: input frames per second. */
async function ffmpegAlone(ffmpeg: string, clip: string, count: number): Promise<number> {
  const started = performance.now();
  await Promise.all(Array.from({ length: count }, () => execute(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-i', clip, '-f', 'null', '-'])));
  return (count * SECONDS * NATIVE_FPS) / ((performance.now() - started) / 1000);
}

/** `count` sources of the clip through the ingest worker: frames decoded, sampled and published per second. */
async function throughIngest(clip: string, dataDir: string, count: number): Promise<{ fps: number; sampledFps: number; publishedFps: number }> {
  const bus = createMemoryBus();
  try {
    // Replays at full speed publish on the backfill topic.
    await bus.createTopics([{ name: Topics.backfillFrames, partitions: 4 }]);
    // Read and dropped, so the bus never holds the sources back.
    await bus.consumer({ groupId: 'bench', topics: [Topics.backfillFrames] }).run(async () => {});
    const ingest = createIngest({ bus, dataDir, logger: silentLogger() });
    const started = performance.now();
    for (let i = 0; i < count; i++) ingest.add(sourceSchema.parse({ id: `cam-${i}`, path: clip, apps: ['bench'], fps: SAMPLED_FPS }));
    await ingest.idle();
    const seconds = (performance.now() - started) / 1000;
    const metrics = ingest.metrics();
    await ingest.close();
    const failed = metrics.find((m) => m.error);
    if (failed) throw new Error(`source ${failed.id} failed: ${failed.error}`);
    const perSecond = (key: 'received' | 'sampled' | 'published'): number => metrics.reduce((n, m) => n + m[key], 0) / seconds;
    return { fps: perSecond('received'), sampledFps: perSecond('sampled'), publishedFps: perSecond('published') };
  } finally {
    await bus.close();
  }
}

export async function ingestBench(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-bench-ingest-'));
  try {
    const ffmpeg = resolveFfmpegPath();
    const clip = join(dir, 'clip-720p.mp4');
    await execute(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', `testsrc2=size=1280x720:rate=${NATIVE_FPS}`, '-t', String(SECONDS), '-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p', clip]);
    const figures: Figures[] = [];
    for (const count of COUNTS) {
      const alone = await ffmpegAlone(ffmpeg, clip, count);
      const ingest = await throughIngest(clip, dir, count);
      figures.push({ count, fps: round(ingest.fps), sampledFps: round(ingest.sampledFps), publishedFps: round(ingest.publishedFps), ffmpegFps: round(alone), ratio: round(ingest.fps / alone, 3) });
      console.log(
        `${count} × 720p: ingest decoded ${ingest.fps.toFixed(1)} frames/s, sampled ${ingest.sampledFps.toFixed(1)}, published ${ingest.publishedFps.toFixed(1)}; ffmpeg alone decoded ${alone.toFixed(1)} frames/s`,
      );
    }
    console.log(JSON.stringify({ sources: figures }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (n: number, digits = 1): number => Number(n.toFixed(digits));
