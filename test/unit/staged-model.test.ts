import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime, cropImage, decodeJpeg, loadModelRunner, type StagedItem } from '../../analyzers/index.js';
import { loadModelZoo, projectRoot, silentLogger, type NodeOutput } from '../../core/index.js';

// Group-wise execution (edge scheduling §2.2): requests that start at different times run stage
// by stage, merging into one batch where they meet, and end with what the whole model answers.
describe('a zoo model run in stages', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const zoo = loadModelZoo();
  afterAll(() => runtime.close());
  const image = (name: string) => decodeJpeg(readFileSync(join(projectRoot(), `test/fixtures/images/${name}.jpg`)));

  it.each([
    ['efficientnet-lite0', 3],
    ['centernet', 3],
  ])('%s in %i stages: requests merging at the middle stage answer as the whole model does', async (name, stages) => {
    const runner = await loadModelRunner(zoo[name]!, runtime);
    const staged = await runner.staged!(stages);
    try {
      expect(staged.stages).toBe(stages);
      expect(staged.shares.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
      const frames = [await image('road-two-cars'), await image('room-person'), cropImage(await image('road-two-cars'), { x1: 100, y1: 0, x2: 270, y2: 260 })];
      const params = runner.parseParams({});
      const whole = await runner.run(frames, frames.map(() => params));
      expect(whole.some((o) => o.kind !== 'detections' || o.detections.length > 0)).toBe(true);
      const items: StagedItem[] = [];
      for (const frame of frames) items.push(staged.begin(await runner.prepare([frame], [params])));
      // a and b start together; a goes one stage on alone; c catches up with b; then all three end together.
      const [a, b, c] = items as [StagedItem, StagedItem, StagedItem];
      await staged.run(0, [a, b]);
      await staged.run(1, [a]);
      await staged.run(0, [c]);
      await staged.run(1, [b, c]);
      await staged.run(2, [a, b, c]);
      const answers = await Promise.all(items.map(async (item) => staged.end(item)));
      answers.forEach((answer, i) => expectSameAnswer(answer, whole[i]!));
    } finally {
      await runner.dispose(); // and the staged model with it
    }
  }, 120_000);
});

function expectSameAnswer(got: NodeOutput, want: NodeOutput): void {
  expect(got.kind).toBe(want.kind);
  if (got.kind === 'attributes' && want.kind === 'attributes') {
    expect(got.attributes[0]!.value).toBe(want.attributes[0]!.value);
    expect(got.attributes[0]!.score).toBeCloseTo(want.attributes[0]!.score, 4);
  }
  if (got.kind === 'detections' && want.kind === 'detections') {
    expect(got.detections.map((d) => d.className)).toEqual(want.detections.map((d) => d.className));
    got.detections.forEach((d, i) => {
      expect(d.score).toBeCloseTo(want.detections[i]!.score, 4);
      expect(d.box.x1).toBeCloseTo(want.detections[i]!.box.x1, 1);
      expect(d.box.y2).toBeCloseTo(want.detections[i]!.box.y2, 1);
    });
  }
}
