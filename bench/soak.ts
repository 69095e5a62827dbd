// `npm run bench -- soak [--minutes N] [--sources N] [--load S] [--fps F]`: the embedded
// pipeline at rated load for a long time, to catch what a short run cannot: memory that grows
// and deadlines that slip. Several sources loop the shared footage at real time (speed 1)
// through the traffic app. Rated load is a share S (default 0.5) of what the detector alone
// runs on this machine, measured first in the same run, so the load means the same on a laptop
// and on a server; `--fps` sets each source's rate instead. The process's RSS and heap are
// sampled every few seconds, and the backend's per-second stats say which model requests were
// answered before their deadline. It prints progress while it runs and ends with one JSON line:
// memory growth (the last window after warm-up against the first, in %) and the on-time
// fraction, each beside its goal.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJpeg, type RgbImage } from '../analyzers/index.js';
import { runDeployment } from '../cli/index.js';
import { rawFps } from './backend.js';
import { compileDeployment, createLogger, deploymentSchema, MIN_FPS, projectRoot, type CompiledConfig, type Logger, type Stats } from '../core/index.js';
import { createFileSource, ensureSyntheticClip } from '../ingest/index.js';

/** The goals of issue 17, set over a 120-minute run. */
export const SOAK_GOALS = { minutes: 120, memoryGrowthPct: 10, onTime: 0.99 } as const;

const CLIPS = ['car-detection.mp4', 'bottle-detection.mp4', 'one-by-one-person-detection.mp4', 'people-detection.gif'];
/** Without the shared clips: moving shapes ffmpeg draws (rendered once into the data directory). */
const SYNTHETIC = { lavfi: 'testsrc2=size=640x360:rate=10', durationS: 60 };

export interface SoakOptions {
  minutes: number;
  /** Sources looping at once. */
  sources: number;
  /** Offered frames per second, as a share of the detector's own rate on this machine. */
  load: number;
  /** Frames sampled per second per source, instead of `load`. */
  fps?: number;
}

export interface MemorySample {
  atMs: number;
  rss: number;
  heapUsed: number;
}

/** Reads `--minutes N`, `--sources N`, `--load S` and `--fps F`; anything else is an error naming it. */
export function parseSoakArgs(args: readonly string[]): SoakOptions {
  const options: SoakOptions = { minutes: SOAK_GOALS.minutes, sources: 4, load: 0.5 };
  for (let i = 0; i < args.length; i += 2) {
    const [flag, text] = [args[i], args[i + 1]];
    const key = flag?.replace(/^--/, '');
    const value = Number(text);
    if (key !== 'minutes' && key !== 'sources' && key !== 'load' && key !== 'fps') {
      throw new Error(`soak: unknown option ${flag}; expected --minutes N, --sources N, --load S or --fps F`);
    }
    if (!(Number.isFinite(value) && value > 0)) throw new Error(`soak: ${flag}: expected a positive number, got ${text ?? 'nothing'}`);
    options[key] = value;
  }
  return options;
}

/**
 * Memory growth in %: the mean of the last window against the mean of the first, both after
 * warm-up (model loading, chDB's first parts and caches). Means, not single samples, so one
 * garbage collection does not decide it. Undefined until there are enough samples.
 */
export function memoryGrowth(samples: readonly MemorySample[], warmupMs: number, field: 'rss' | 'heapUsed'): { pct: number; firstMB: number; lastMB: number } | undefined {
  const start = samples[0]?.atMs ?? 0;
  const measured = samples.filter((s) => s.atMs - start >= warmupMs);
  const window = Math.max(3, Math.floor(measured.length / 5));
  if (measured.length < 2 * window) return undefined;
  const mean = (list: readonly MemorySample[]): number => list.reduce((sum, s) => sum + s[field], 0) / list.length;
  const [first, last] = [mean(measured.slice(0, window)), mean(measured.slice(-window))];
  return { pct: (last / first - 1) * 100, firstMB: first / 2 ** 20, lastMB: last / 2 ** 20 };
}

/** Model requests answered (handled = run + dropped) and those late or dropped, from one stats interval. */
export function requestsOf(stats: Stats): { handled: number; bad: number } {
  let handled = 0;
  let bad = 0;
  for (const s of stats.sessions) {
    const n = s.batchSizes.reduce((a, b) => a + b, 0) + s.dropped;
    handled += n;
    bad += Math.round(s.badRate * n);
  }
  return { handled, bad };
}

/** The detector alone on a clip's first frames, back to back at the backend's batch: frames per second on this machine now. */
async function detectorFps(clip: string, config: CompiledConfig, logger: Logger): Promise<number> {
  const images: RgbImage[] = [];
  for await (const frame of createFileSource({ id: 'probe', path: clip, fps: 5, speed: 'max', loop: false, logger }).frames()) {
    images.push(await decodeJpeg(frame.jpeg));
    if (images.length === 40) break;
  }
  return rawFps(images, config);
}

export async function soakBench(args: readonly string[]): Promise<void> {
  const options = parseSoakArgs(args);
  const durationMs = options.minutes * 60_000;
  // Long enough for the models to load and chDB to settle; a quarter of a short run.
  const warmupMs = Math.min(10 * 60_000, durationMs / 4);
  const sampleMs = Math.min(5_000, Math.max(1_000, durationMs / 100));
  const footage = join(projectRoot(), '../shared/footage');
  const shared = CLIPS.map((c) => join(footage, c)).filter((c) => existsSync(c));
  if (shared.length === 0) console.error(`soak: ${footage} not found (shared footage absent); replaying synthetic footage (${SYNTHETIC.lavfi}) instead`);

  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-soak-'));
  const logger = createLogger({ level: 'error' });
  try {
    const clips = shared.length > 0 ? shared : [await ensureSyntheticClip('soak', SYNTHETIC, join(dataDir, 'footage'), logger)];
    const deployment = (fps: number): CompiledConfig => {
      const sources = Array.from({ length: options.sources }, (_, i) => ({ id: `soak-${i}`, path: clips[i % clips.length]!, apps: ['traffic'], fps, speed: 1, loop: true }));
      return compileDeployment(deploymentSchema.parse({ apps: ['apps/traffic.yaml'], sources }), join(projectRoot(), 'configs/bench.yaml'), { dataDir });
    };
    const rawFps = options.fps === undefined ? await detectorFps(clips[0]!, deployment(1), logger) : undefined;
    const fps = options.fps ?? Math.max(MIN_FPS, Number(((options.load * rawFps!) / options.sources).toFixed(3)));
    const config = deployment(fps);
    const rated = rawFps === undefined ? '' : ` (${options.load} of the detector's ${rawFps.toFixed(2)} frames/s alone)`;
    console.log(`soak: ${options.sources} sources at ${fps} fps each${rated}, real time, through the traffic app for ${options.minutes} min (warm-up ${(warmupMs / 1000).toFixed(0)} s)`);

    const started = Date.now();
    const samples: MemorySample[] = [];
    const sample = (): void => {
      const { rss, heapUsed } = process.memoryUsage();
      samples.push({ atMs: Date.now(), rss, heapUsed });
    };
    const requests = { handled: 0, bad: 0, handledAll: 0, badAll: 0 };
    const onStats = (stats: Stats): void => {
      const { handled, bad } = requestsOf(stats);
      requests.handledAll += handled;
      requests.badAll += bad;
      if (stats.fromMs - started < warmupMs) return;
      requests.handled += handled;
      requests.bad += bad;
    };
    const onTime = (handled: number, bad: number): number | undefined => (handled > 0 ? 1 - bad / handled : undefined);
    const progress = (): void => {
      const last = samples.at(-1);
      const share = onTime(requests.handledAll, requests.badAll);
      console.error(
        `soak: ${((Date.now() - started) / 60_000).toFixed(1)}/${options.minutes} min, ${requests.handledAll} requests, ` +
          `on time ${share === undefined ? '-' : `${(share * 100).toFixed(2)}%`}, rss ${last ? (last.rss / 2 ** 20).toFixed(0) : '-'} MB, heap ${last ? (last.heapUsed / 2 ** 20).toFixed(0) : '-'} MB`,
      );
    };

    const stop = new AbortController();
    const timers = [
      setTimeout(() => stop.abort(), durationMs),
      setInterval(sample, sampleMs),
      setInterval(progress, Math.min(60_000, Math.max(10_000, durationMs / 20))),
    ];
    sample();
    let summary;
    try {
      summary = await runDeployment(config, {
        logger,
        signal: stop.signal,
        onStats,
        // Per source, so that a slow or late source stands out from a loaded machine.
        beforeClose: async (sink) => {
          const { rows } = await sink.query(`
            SELECT source, sum(analyzed) AS analyzed, sum(dropped) AS dropped FROM (
              SELECT source, count() AS analyzed, 0 AS dropped FROM frames GROUP BY source
              UNION ALL SELECT source, 0, count() FROM drops GROUP BY source)
            GROUP BY source ORDER BY source`);
          for (const r of rows) console.log(`  ${String(r.source)}: ${String(r.analyzed)} frames analyzed, ${String(r.dropped)} drops`);
        },
      });
    } finally {
      for (const timer of timers) clearTimeout(timer);
    }
    progress();

    const rss = memoryGrowth(samples, warmupMs, 'rss');
    const heap = memoryGrowth(samples, warmupMs, 'heapUsed');
    const share = onTime(requests.handled, requests.bad);
    const offered = options.sources * fps * (durationMs / 1000);
    const round = (n: number | undefined, digits: number): number | null => (n === undefined ? null : Number(n.toFixed(digits)));
    console.log(`frames analyzed: ${summary.frames} of about ${Math.round(offered)} offered; drops: ${summary.drops} (deadline ${summary.deadlineDrops}), late: ${summary.late}`);
    console.log(`memory after warm-up: rss ${rss ? `${rss.firstMB.toFixed(0)} → ${rss.lastMB.toFixed(0)} MB (${rss.pct.toFixed(1)}%)` : 'too few samples'}, heap ${heap ? `${heap.firstMB.toFixed(0)} → ${heap.lastMB.toFixed(0)} MB (${heap.pct.toFixed(1)}%)` : 'too few samples'}; goal < ${SOAK_GOALS.memoryGrowthPct}%`);
    console.log(`on time after warm-up: ${share === undefined ? 'no requests' : `${(share * 100).toFixed(2)}%`} of ${requests.handled} model requests; goal >= ${SOAK_GOALS.onTime * 100}%`);
    console.log(JSON.stringify({
      minutes: options.minutes,
      sources: options.sources,
      fps,
      detectorFps: round(rawFps, 2),
      footage: shared.length > 0 ? 'shared' : 'synthetic',
      frames: summary.frames,
      requests: requests.handled,
      memoryGrowthPct: round(rss?.pct, 1),
      memoryGrowthGoalPct: SOAK_GOALS.memoryGrowthPct,
      heapGrowthPct: round(heap?.pct, 1),
      onTime: round(share, 4),
      onTimeGoal: SOAK_GOALS.onTime,
      goalMinutes: SOAK_GOALS.minutes,
    }));
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
