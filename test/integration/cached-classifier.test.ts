/**
 * A learned cache on an image classifier node in the pipeline (docs/examples/vehicle-kinds-cached.yaml):
 * CenterNet's vehicles in car-detection.mp4 (played three times), cropped and classified by EfficientNet-Lite2, its
 * caches explored on the first crops and serving the rest. What it checks is the plumbing with
 * the real models: every crop answered once, where it exited recorded on its row, the caches'
 * figures in session_stats agreeing with the rows. The accuracy filter is lowered so that some
 * cache serves on a clip this short; the answers themselves are tested in
 * test/unit/classifier-cache.test.ts.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';
import { exampleApp, loopedClip, runApps } from './run-app.js';

const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');

describe.skipIf(!existsSync(clip))('a cached classifier on car-detection.mp4 (needs ../shared/footage)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-cached-classifier-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('answers every crop, records each exit, and reports the caches in session_stats', async () => {
    // Scaled down to the clip: 150 crops recorded (30 measure each variant: a variant vouches with
    // 10 hits there), one layer, small variants, a lax filter.
    const file = exampleApp(dir, 'vehicle-kinds-cached', (node) => (node('kind').cache = { layers: [11], explore: 150, maxClasses: 4, maxParameters: 30_000, accuracyTarget: 0.5, group: 10, sampled: 4, window: 20, period: 20 }));
    // The clip played three times over: exploration takes seconds of training (a minute on a machine
    // busy with other tests), and the caches serve after it.
    const looped = loopedClip(dir, clip, 3);

    // One model thread: with two, crops are recorded in the order the threads finish them, and on a
    // clip this short that order alone decides whether a variant has the 10 held-out hits that vouch
    // for it (4 to 20 of 48 in five runs exploring 240 crops; 9 of 30 in a failed run of this test).
    const { summary, rows } = await runApps([file], { id: 'road', path: looped, apps: ['vehicle-kinds'], fps: 12 }, {
      crops: "SELECT count() AS n FROM detections WHERE app = 'vehicle-kinds' AND node = 'vehicles'",
      exits: "SELECT exit, cache_variant, count() AS n, uniqExact(object_id) AS objects FROM recognitions WHERE app = 'vehicle-kinds' AND node = 'kind' GROUP BY exit, cache_variant ORDER BY exit",
      stats: "SELECT stream, cache_layer, argMax(hit_rate, at) AS hit_rate, argMax(expected_hit_rate, at) AS expected FROM session_stats WHERE session = 'vehicle-kinds/kind' GROUP BY stream, cache_layer",
    }, { threads: 1 });
    console.log(`cached classifier: ${JSON.stringify(rows)}; drops ${summary.drops}`);
    expect(summary.drops).toBe(0);

    const exits = rows.exits as { exit: string; cache_variant: string; n: number; objects: number }[];
    const total = exits.reduce((n, e) => n + Number(e.n), 0);
    expect(total).toBe(Number(rows.crops![0]!.n));
    expect(exits.reduce((n, e) => n + Number(e.objects), 0)).toBe(total);
    expect(total).toBeGreaterThan(150);
    // The first 150 crops ran the model whole (recorded); then the caches served.
    const full = exits.find((e) => e.exit === 'full');
    expect(Number(full?.n)).toBeGreaterThanOrEqual(150);
    const hits = exits.filter((e) => e.exit !== 'full');
    for (const e of hits) expect(e).toMatchObject({ exit: '_blocks/12/add', cache_variant: expect.stringMatching(/^Pool\(\d+\)$/) });

    const [stats] = rows.stats as { stream: string; cache_layer: string; hit_rate: number; expected: number }[];
    expect(stats).toMatchObject({ stream: 'road', cache_layer: '_blocks/12/add' });
    expect(Number(stats!.expected)).toBeGreaterThan(0);
    // The stats cover the crops since the caches served (fewer than those after the first 150, which
    // ran whole while exploring); the last interval may end before the last crops.
    const hitCount = hits.reduce((n, e) => n + Number(e.n), 0);
    expect(Number(stats!.hit_rate)).toBeLessThanOrEqual(1);
    expect(Number(stats!.hit_rate)).toBeGreaterThanOrEqual(hitCount / (total - 150) - 0.1);
  }, 300_000);
});
