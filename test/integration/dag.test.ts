import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDeployment } from '../../cli/deployment.js';
import { compileDeployment, deploymentSchema, projectRoot, silentLogger } from '../../core/index.js';

const root = projectRoot();
const fixtures = join(root, 'test/fixtures');

describe('a two-stage app: text regions, then each region read through the tasks topic', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-dag-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('stores the text of every region, with boxes in frame pixels', async () => {
    const deployment = deploymentSchema.parse({
      models: join(root, 'configs/models.yaml'),
      apps: ['signs.yaml'],
      sources: [
        { id: 'hud', path: join(fixtures, 'ocr/hud.png'), apps: ['signs'] },
        { id: 'plate', path: join(fixtures, 'ocr/plate.png'), apps: ['signs'] },
      ],
    });
    const config = compileDeployment(deployment, join(fixtures, 'apps/deployment.yaml'), { dataDir });

    let texts: Record<string, unknown>[] = [];
    let regions: Record<string, unknown>[] = [];
    const summary = await runDeployment(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        texts = (await sink.query("SELECT source, frame_seq, node, value AS text, x1, y1, x2, y2 FROM recognitions WHERE kind = 'text' ORDER BY source, x1")).rows;
        regions = (await sink.query("SELECT source, x1, y1, x2, y2 FROM detections WHERE node = 'find-text' ORDER BY source, x1")).rows;
      },
    });

    expect(summary.drops).toBe(0);
    // PP-OCRv4 (a Chinese-first model) emits the space between Latin words unreliably: compare without spaces.
    const read = (source: string): string => texts.filter((t) => t.source === source).map((t) => String(t.text)).join('').replace(/\s+/g, '');
    expect(read('hud')).toBe('SCORE1234KILLS7');
    expect(read('plate')).toBe('AB123CD');
    expect(texts.every((t) => t.node === 'read-text' && t.frame_seq === 0)).toBe(true);
    // Each text row's box is the crop of its region, moved back into the frame.
    for (const t of texts) {
      const region = regions.find((r) => r.source === t.source && Math.abs(Number(r.x1) - Number(t.x1)) <= 1 && Math.abs(Number(r.y1) - Number(t.y1)) <= 1);
      expect(region, JSON.stringify(t)).toBeDefined();
    }
  });
});
