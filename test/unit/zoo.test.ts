import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime, decodeJpeg, loadModelRunner, type ModelRunner } from '../../analyzers/index.js';
import { ErrorCode, loadModelZoo, projectRoot, silentLogger, type NodeOutput } from '../../core/index.js';

const root = projectRoot();

describe('model zoo runners', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const zoo = loadModelZoo();
  afterAll(() => runtime.close());

  const classes = (out: NodeOutput | undefined): string[] => (out?.kind === 'detections' ? out.detections.map((d) => d.className) : []);

  it('centernet: node params are checked, and per-class thresholds override minScore', async () => {
    const runner: ModelRunner = await loadModelRunner(zoo.centernet!, runtime);
    expect(() => runner.parseParams({ minScore: 2 })).toThrow(expect.objectContaining({ code: ErrorCode.AppInvalid }));
    expect(() => runner.parseParams({ minScores: { unicorn: 0.5 } })).toThrow(/unicorn/);
    expect(() => runner.parseParams({ minScroe: 0.5 })).toThrow(/minScroe/);
    // Every problem at once, not the first only.
    expect(() => runner.parseParams({ minScore: 'high', maxDetections: -5 })).toThrow(/params\.minScore: .*; params\.maxDetections: .* for model centernet/);

    const image = await decodeJpeg(readFileSync(join(root, 'test/fixtures/images/room-person.jpg')));
    const [strict, loose] = await runner.run([image, image], [
      runner.parseParams({ minScore: 0.3, minScores: { person: 0.9 } }),
      runner.parseParams({ minScore: 0.9, minScores: { person: 0.5 }, classes: ['person'] }),
    ]);
    expect(classes(strict)).not.toContain('person');
    expect(classes(loose)).toEqual(['person']);
    await runner.dispose();
  });

  it('an unknown architecture is a clear error naming the model', async () => {
    await expect(loadModelRunner({ ...zoo.centernet!, name: 'mystery', architecture: 'yolo-v42' }, runtime)).rejects.toMatchObject({
      code: ErrorCode.ModelLoad,
      message: expect.stringContaining('mystery'),
    });
  });
});
