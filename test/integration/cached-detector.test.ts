/**
 * A learned cache on a detector node in the pipeline (bench/apps/detect-cached.yaml): CenterNet on
 * every frame of car-detection.mp4, learned online from the clip as it plays. What it checks is
 * the plumbing with the real model: every frame answered once, where it exited recorded on the
 * rows, the cache's figures in session_stats agreeing with the rows, and answers that agree with
 * the detector's own. The cache's answers themselves are tested in test/unit/frame-cache.test.ts.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';
import { runApps } from './run-app.js';

const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');

describe.skipIf(!existsSync(clip))('a cached detector on car-detection.mp4 (needs ../shared/footage)', () => {
  it('answers every frame, records each exit, and reports its hit rate in session_stats', async () => {
    const { summary, rows } = await runApps([join(root, 'bench/apps/detect-cached.yaml')], { id: 'road', path: clip, apps: ['detect'] }, {
      exits: "SELECT exit, cache_variant, count() AS n FROM frames WHERE app = 'detect' GROUP BY exit, cache_variant ORDER BY exit",
      frames: "SELECT count() AS n, uniqExact(frame_seq) AS seqs FROM frames WHERE app = 'detect'",
      detectionExits: "SELECT count() AS n FROM detections d WHERE app = 'detect' AND exit = ''",
      stats: "SELECT stream, argMax(hit_rate, at) AS hit_rate, argMax(observed_accuracy, at) AS observed, max(expected_accuracy) AS expected, argMax(retrains, at) AS retrains FROM session_stats WHERE session = 'detect/detect' GROUP BY stream",
    });
    console.log(`cached detector: ${JSON.stringify(rows)}; drops ${summary.drops}`);
    expect(summary.drops).toBe(0);
    const frames = rows.frames![0] as { n: number; seqs: number };
    expect(Number(frames.n)).toBe(summary.frames);
    expect(Number(frames.seqs)).toBe(summary.frames);

    const exits = rows.exits as { exit: string; cache_variant: string; n: number }[];
    expect(exits.map((e) => e.exit)).toEqual(['full', expect.stringMatching(/expanded_conv_2\/add/)]);
    for (const e of exits) expect(e.cache_variant).toBe('Pool(64×C) change');
    const hits = Number(exits[1]!.n);
    // The clip's road is empty for most of its 30 s: once learned, the cache answers a share of it.
    expect(hits).toBeGreaterThan(summary.frames / 10);
    expect(Number(rows.detectionExits![0]!.n)).toBe(0);

    const [stats] = rows.stats as { stream: string; hit_rate: number; observed: number; expected: number; retrains: number }[];
    expect(stats!.stream).toBe('road');
    expect(Number(stats!.retrains)).toBeGreaterThan(0);
    // The selectors that served were calibrated to the target (the last retraining's, made from the
    // clip's final pairs as the training thread found them, may not be vouched, and serves nothing).
    expect(Number(stats!.expected)).toBeGreaterThanOrEqual(0.97);
    // The last stats interval may end before the last frames: the rate agrees to a few frames.
    expect(Number(stats!.hit_rate)).toBeCloseTo(hits / summary.frames, 1);
  }, 300_000);
});
