// `npm run bench -- colocate [--live-share S]`: a live stream of the traffic app at its rated
// load, alone and then with a replay of recorded footage at `--speed max` beside it on the same
// backend (DeepQuery's co-location with plan-ahead, analyzers/backend/plan-ahead.ts).
//   1. The replay alone: the app's full throughput on this machine, C frames/s (steady: its first
//      and last seconds, start-up and the last frames, left out).
//   2. The live stream alone at S·C frames/s (default S = 0.4), in real time: its on-time share.
//   3. Both: the live stream's on-time share, and the replay's frames/s while the live stream runs.
//   4. Both with plan-ahead off (naive co-location), for comparison.
// The idle capacity the live stream leaves is C minus its frames/s (the same app on the same
// footage); `replayIdleShare` is the replay's throughput over that. A second copy of the app
// serves the replay, so that the backend's per-app stats tell the two apart.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runDeployment } from '../cli/index.js';
import { compileDeployment, createLogger, deploymentSchema, projectRoot, type Stats } from '../core/index.js';

const logger = createLogger({ level: 'warn' });
const LIVE_APP = 'traffic';
const REPLAY_APP = 'traffic-replay';
const clip = join(projectRoot(), '../shared/footage/car-detection.mp4');

interface Run {
  /** Model requests of the live app, and of them those on time (the app's SLO attainment). */
  liveRequests: number;
  liveLate: number;
  liveDropped: number;
  liveOnTime: number;
  /** Frames/s the live app took in while it ran, and the replay's app meanwhile. */
  liveFps: number;
  replayFpsWhileLive: number;
  /** Frames/s the replay's app took in, steady (its first and last stats intervals left out). */
  replayFps: number;
  replayFrames: number;
  processingS: number;
}

export async function colocateBench(args: readonly string[]): Promise<void> {
  if (!existsSync(clip)) throw new Error(`the colocate benchmark needs ${clip} (../shared/footage beside the project)`);
  const liveShare = Number(valueOf(args, '--live-share') ?? 0.4);
  if (!(liveShare > 0 && liveShare < 1)) throw new Error(`--live-share: expected a share of the app's throughput between 0 and 1, got ${valueOf(args, '--live-share')}`);
  const scratch = mkdtempSync(join(tmpdir(), 'panoptes-bench-colocate-'));
  try {
    // The traffic app twice, under two names.
    const trafficFile = join(projectRoot(), 'configs/apps/traffic.yaml');
    const replayFile = join(scratch, 'traffic-replay.yaml');
    writeFileSync(replayFile, readFileSync(trafficFile, 'utf8').replace(/^name: traffic$/m, `name: ${REPLAY_APP}`).replaceAll(`app = 'traffic'`, `app = '${REPLAY_APP}'`));
    const live = (fps: number) => ({ id: 'road-live', path: clip, apps: [LIVE_APP], fps, speed: 1 });
    const replay = { id: 'road-replay', path: clip, apps: [REPLAY_APP], speed: 'max' };
    let runs = 0;
    const run = async (sources: unknown[], planAhead = true): Promise<Run> => {
      const dataDir = join(scratch, `run-${runs++}`);
      const deployment = deploymentSchema.parse({ apps: [trafficFile, replayFile], sources, backend: { planAhead } });
      const stats: Stats[] = [];
      const summary = await runDeployment(compileDeployment(deployment, join(projectRoot(), 'configs/bench.yaml'), { dataDir }), { logger, onStats: (s) => stats.push(s) });
      rmSync(dataDir, { recursive: true, force: true });
      const app = (s: Stats, name: string) => s.apps?.find((a) => a.app === name);
      const liveIntervals = stats.filter((s) => (app(s, LIVE_APP)?.framesRate ?? 0) > 0);
      const [liveRequests, liveLate, liveDropped] = stats.reduce(([n, late, dropped], s) => {
        const a = app(s, LIVE_APP);
        return [n + (a?.requests ?? 0), late + (a?.late ?? 0), dropped + (a?.dropped ?? 0)];
      }, [0, 0, 0]);
      const framesIn = (intervals: readonly Stats[], name: string): number => intervals.reduce((sum, s) => sum + (app(s, name)?.framesRate ?? 0) * ((s.toMs - s.fromMs) / 1000), 0);
      // The replay's steady rate: its intervals but the first and last (start-up, the last frames).
      const replaying = stats.filter((s) => (app(s, REPLAY_APP)?.framesRate ?? 0) > 0).slice(1, -1);
      const replaySeconds = replaying.reduce((sum, s) => sum + (s.toMs - s.fromMs) / 1000, 0);
      const liveSeconds = liveIntervals.reduce((sum, s) => sum + (s.toMs - s.fromMs) / 1000, 0);
      return {
        liveRequests,
        liveLate,
        liveDropped,
        liveOnTime: liveRequests === 0 ? 0 : (liveRequests - liveLate - liveDropped) / liveRequests,
        liveFps: liveSeconds === 0 ? 0 : framesIn(liveIntervals, LIVE_APP) / liveSeconds,
        replayFpsWhileLive: liveSeconds === 0 ? 0 : framesIn(liveIntervals, REPLAY_APP) / liveSeconds,
        replayFps: replaySeconds === 0 ? 0 : framesIn(replaying, REPLAY_APP) / replaySeconds,
        replayFrames: summary.sources.find((s) => s.id === replay.id)?.frames ?? 0,
        processingS: summary.processingMs / 1000,
      };
    };

    const alone = await run([replay]);
    const capacityFps = alone.replayFps;
    const offeredFps = round(liveShare * capacityFps, 2);
    console.log(`replay alone: ${alone.replayFrames} frames in ${alone.processingS.toFixed(1)} s, ${capacityFps.toFixed(2)} frames/s steady (the app's throughput here)`);
    const onTime = (r: Run): string => `${(100 * r.liveOnTime).toFixed(2)}% of ${r.liveRequests} requests on time (${r.liveLate} late, ${r.liveDropped} dropped)`;
    const liveAlone = await run([live(offeredFps)]);
    // What the live stream took in: the clip's own frame rate caps what was asked.
    const liveFps = liveAlone.liveFps;
    console.log(`live alone, ${liveFps.toFixed(2)} frames/s: ${onTime(liveAlone)}`);
    const both = await run([live(offeredFps), replay]);
    const naive = await run([live(offeredFps), replay], false);
    console.log(`live with the replay beside it, plan-ahead off (naive co-location): ${onTime(naive)}; replay ${naive.replayFpsWhileLive.toFixed(2)} frames/s while live runs`);
    const idleFps = capacityFps - liveFps;
    console.log(
      `live with the replay beside it: ${onTime(both)}; ` +
        `replay ${both.replayFpsWhileLive.toFixed(2)} frames/s while live runs, of the ${idleFps.toFixed(2)} the idle capacity allows`,
    );
    console.log(
      JSON.stringify({
        liveAloneOnTime: round(liveAlone.liveOnTime, 4),
        liveWithReplayOnTime: round(both.liveOnTime, 4),
        liveWithNaiveReplayOnTime: round(naive.liveOnTime, 4),
        replayFps: round(both.replayFpsWhileLive, 2),
        replayIdleShare: round(both.replayFpsWhileLive / idleFps, 3),
        liveFps: round(liveFps, 2),
        capacityFps: round(capacityFps, 2),
      }),
    );
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

function valueOf(args: readonly string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));
