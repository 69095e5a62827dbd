import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDeployment, type RunSummary } from '../../cli/deployment.js';
import { compileDeployment, deploymentSchema, projectRoot, silentLogger } from '../../core/index.js';

const footage = join(projectRoot(), '../shared/footage');
const clip = join(footage, 'car-detection.mp4');
const labels = JSON.parse(readFileSync(join(projectRoot(), 'test/fixtures/labels/car-detection.json'), 'utf8')) as {
  labelFps: number;
  carVisible: [number, number][];
  emptyRoad: [number, number][];
};
const CLIP_FPS = 12.5;
/** The label index (2 fps) a frame of the clip's own rate falls in. */
const labelIndex = (seq: number): number => Math.floor((seq / CLIP_FPS) * labels.labelFps);
const inRange = (i: number, [a, b]: [number, number]): boolean => i >= a && i <= b;
/** Labels are coarser than the clip: the label next to a car passage may show its edge, so it proves nothing either way. */
const clearlyEmpty = (i: number): boolean =>
  labels.emptyRoad.some((r) => inRange(i, r)) && !labels.carVisible.some(([a, b]) => inRange(i, [a - 1, b + 1]));

describe.skipIf(!existsSync(clip))('embedded pipeline on car-detection.mp4 at its own frame rate (needs ../shared/footage)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-it-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('stores car detections on frames with a car and none on empty road', async () => {
    const deployment = deploymentSchema.parse({
      apps: ['apps/traffic.yaml'],
      sources: [{ id: 'road', path: clip, apps: ['traffic'], speed: 'max' }],
    });
    const config = compileDeployment(deployment, join(projectRoot(), 'configs/test.yaml'), { dataDir });

    let carFrames: number[] = [];
    let frameRows = 0;
    const summary: RunSummary = await runDeployment(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        const cars = await sink.query("SELECT DISTINCT frame_seq FROM detections WHERE source = 'road' AND class = 'car' ORDER BY frame_seq");
        carFrames = cars.rows.map((r) => Number(r.frame_seq));
        frameRows = Number((await sink.query("SELECT count() AS n FROM frames WHERE source = 'road'")).rows[0]?.n);
      },
    });

    const frames = summary.sources[0]?.frames ?? 0;
    expect(frames).toBeGreaterThanOrEqual(370); // 30 s at 12.5 fps
    expect(summary.drops).toBe(0);
    expect(frameRows).toBe(frames); // every frame produced its summary row: nothing lost

    expect(carFrames.filter((seq) => clearlyEmpty(labelIndex(seq)))).toEqual([]);
    // CenterNet calls a car seen from straight above `cell phone` on some frames (see README),
    // so each passage needs cars on a share of its frames, not on all of them.
    for (const passage of labels.carVisible) {
      const passageFrames = Array.from({ length: frames }, (_, seq) => seq).filter((seq) => inRange(labelIndex(seq), passage));
      const withCar = passageFrames.filter((seq) => carFrames.includes(seq));
      expect(withCar.length / passageFrames.length, `share of frames with a car in labels ${passage.join('..')}`).toBeGreaterThanOrEqual(0.25);
    }
  }, 180_000); // 377 frames through the detector on 2 cores shared with other test files
});
