import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeJpeg } from '../../analyzers/index.js';
import { rawFps } from '../../bench/backend.js';
import { compileDeployment, deploymentSchema, projectRoot } from '../../core/index.js';
import { memoryGrowth, parseSoakArgs, requestsOf, SOAK_GOALS, type MemorySample } from '../../bench/soak.js';
import type { Stats } from '../../core/index.js';

describe('soak benchmark', () => {
  it('runs 120 minutes at half the detector\'s rate by default; --minutes, --sources, --load and --fps change it; anything else is named', () => {
    expect(parseSoakArgs([])).toEqual({ minutes: SOAK_GOALS.minutes, sources: 4, load: 0.5 });
    expect(parseSoakArgs(['--minutes', '3', '--fps', '0.5'])).toEqual({ minutes: 3, sources: 4, load: 0.5, fps: 0.5 });
    expect(() => parseSoakArgs(['--minutes'])).toThrow('soak: --minutes: expected a positive number, got nothing');
    expect(() => parseSoakArgs(['--hours', '2'])).toThrow('soak: unknown option --hours');
  });

  it("measures the detector's raw rate on the soak's own deployment, the traffic app alone", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-soak-probe-'));
    try {
      const image = await decodeJpeg(readFileSync(join(projectRoot(), 'test/fixtures/images/road-two-cars.jpg')));
      const sources = [{ id: 'probe', path: join(projectRoot(), 'test/fixtures/images/road-two-cars.jpg'), apps: ['traffic'] }];
      const config = compileDeployment(deploymentSchema.parse({ apps: ['apps/traffic.yaml'], sources }), join(projectRoot(), 'configs/bench.yaml'), { dataDir });
      expect(await rawFps([image, image], config)).toBeGreaterThan(0);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);

  it('memory growth compares the mean of the last window after warm-up with the first, ignoring warm-up', () => {
    const MB = 2 ** 20;
    // 60 s of warm-up climbing from 100 to 400 MB, then 100 samples from 500 MB rising 1 MB each.
    const samples: MemorySample[] = [
      ...Array.from({ length: 12 }, (_, i) => ({ atMs: i * 5_000, rss: (100 + i * 25) * MB, heapUsed: 50 * MB })),
      ...Array.from({ length: 100 }, (_, i) => ({ atMs: 60_000 + i * 5_000, rss: (500 + i) * MB, heapUsed: 50 * MB })),
    ];
    const growth = memoryGrowth(samples, 60_000, 'rss')!;
    // windows of 20 samples: means 509.5 and 589.5 MB
    expect(growth.firstMB).toBeCloseTo(509.5);
    expect(growth.lastMB).toBeCloseTo(589.5);
    expect(growth.pct).toBeCloseTo((589.5 / 509.5 - 1) * 100);
    expect(memoryGrowth(samples, 60_000, 'heapUsed')!.pct).toBe(0);
    expect(memoryGrowth(samples.slice(0, 15), 60_000, 'rss')).toBeUndefined(); // too few after warm-up
  });

  it('counts model requests handled (run + dropped) and those late or dropped from the backend\'s stats', () => {
    const session = (batchSizes: number[], dropped: number, badRate: number): Stats['sessions'][number] => ({
      session: 's', arrivalRate: 0, queueLength: 0, batchSizes, latencyP50Ms: 0, latencyP99Ms: 0, dropped, badRate,
    });
    const stats: Stats = { backend: 'b', fromMs: 0, toMs: 1000, edges: [], sessions: [session([4, 4], 2, 0.3), session([1], 0, 0)] };
    expect(requestsOf(stats)).toEqual({ handled: 11, bad: 3 });
  });
});
