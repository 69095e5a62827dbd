import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runEmbedded, type RunSummary } from '../../cli/embedded.js';
import { compileDeployment, deploymentSchema, projectRoot, silentLogger } from '../../core/index.js';

const footage = join(projectRoot(), '../shared/footage');
const clip = join(footage, 'car-detection.mp4');
const labels = JSON.parse(readFileSync(join(projectRoot(), 'test/fixtures/labels/car-detection.json'), 'utf8')) as {
  carVisible: [number, number][];
  emptyRoad: [number, number][];
};
const inRanges = (seq: number, ranges: [number, number][]): boolean => ranges.some(([a, b]) => seq >= a && seq <= b);

describe.skipIf(!existsSync(clip))('embedded pipeline on car-detection.mp4 (needs ../shared/footage)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-it-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('stores car detections on frames with a car and none on empty road', async () => {
    const deployment = deploymentSchema.parse({
      apps: ['apps/traffic.yaml'],
      sources: [{ id: 'road', path: clip, apps: ['traffic'], fps: 2, speed: 'max' }],
    });
    const config = compileDeployment(deployment, join(projectRoot(), 'configs/test.yaml'), { dataDir });

    let carFrames: number[] = [];
    let frameRows = 0;
    const summary: RunSummary = await runEmbedded(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        const cars = await sink.query("SELECT DISTINCT frame_seq FROM detections FINAL WHERE source = 'road' AND class = 'car' ORDER BY frame_seq");
        carFrames = cars.rows.map((r) => Number(r.frame_seq));
        frameRows = Number((await sink.query("SELECT count() AS n FROM frames FINAL WHERE source = 'road'")).rows[0]?.n);
      },
    });

    expect(summary.sources).toEqual([{ id: 'road', frames: 60 }]);
    expect(summary.drops).toBe(0);
    expect(frameRows).toBe(60); // every frame produced its summary row: nothing lost
    expect(carFrames.filter((seq) => inRanges(seq, labels.emptyRoad))).toEqual([]);
    for (const passage of labels.carVisible) {
      expect(carFrames.some((seq) => inRanges(seq, [passage])), `a car in frames ${passage.join('..')}`).toBe(true);
    }
    // CenterNet labels a car seen from straight above as `cell phone` on some frames (see README).
    expect(carFrames.length).toBeGreaterThanOrEqual(8);
  });
});
