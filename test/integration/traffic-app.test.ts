/**
 * Ground truth for the traffic app: the cars crossing the middle of car-detection.mp4, labelled
 * by hand in test/fixtures/labels/car-detection.json (the file says how). The clip shows no
 * legible plate, so the plate path is checked on one of its frames with a plate drawn on the car.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadApp, loadModelZoo, projectRoot } from '../../core/index.js';
import { resolveFfmpegPath } from '../../ingest/index.js';
import { runApps } from './run-app.js';

const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');
const labels = JSON.parse(readFileSync(join(root, 'test/fixtures/labels/car-detection.json'), 'utf8')) as {
  crossings: { class: string; direction: string; crossesAt: number }[];
};

const countBy = (rows: { class: string; direction: string }[]): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const r of rows) counts[`${r.class} ${r.direction}`] = (counts[`${r.class} ${r.direction}`] ?? 0) + 1;
  return counts;
};

describe.skipIf(!existsSync(clip))('the traffic app on car-detection.mp4 (needs ../shared/footage)', () => {
  it.each([2, 4])('counts the hand-labelled crossings per direction and class at %i fps', async (fps) => {
    const { summary, rows } = await runApps(['traffic'], { id: 'road', path: clip, apps: ['traffic'], fps }, {
      crossings: "SELECT class, direction, frame_seq, track_id, snapshot FROM events WHERE app = 'traffic' AND event = 'line_crossing' ORDER BY frame_seq",
      saved: "SELECT class, direction, count() AS count FROM events WHERE app = 'traffic' AND event = 'line_crossing' GROUP BY class, direction ORDER BY class, direction",
      untracked: "SELECT count() AS n FROM detections WHERE app = 'traffic' AND track_id = ''",
    });
    expect(summary.drops).toBe(0);
    const crossings = rows.crossings as { class: string; direction: string; frame_seq: number; track_id: string; snapshot: string }[];
    // Each crossing has its picture, named by app, source and frame.
    for (const c of crossings) expect(c.snapshot).toMatch(new RegExp(`^traffic/road/${c.frame_seq}-[0-9a-f]{16}\\.jpg$`));
    console.log(`traffic at ${fps} fps: ${JSON.stringify(crossings)}`);

    expect(countBy(crossings)).toEqual(countBy(labels.crossings));
    // Each at the labelled time, within a second, and by a different track.
    crossings.forEach((c, i) => {
      const label = labels.crossings[i]!;
      expect(c.direction).toBe(label.direction);
      expect(Math.abs(Number(c.frame_seq) / fps - label.crossesAt)).toBeLessThanOrEqual(1);
    });
    expect(new Set(crossings.map((c) => c.track_id)).size).toBe(crossings.length);
    // Every detection of a tracked class has a track: frames reached the tracker in order.
    expect(rows.untracked).toEqual([{ n: 0 }]);
    expect(rows.saved).toEqual(
      Object.entries(countBy(labels.crossings)).sort().map(([key, count]) => {
        const [cls, direction] = key.split(' ');
        return { class: cls, direction, count };
      }),
    );
  }, 300_000);
});

describe.skipIf(!existsSync(clip))('the traffic app reading a plate (needs ../shared/footage)', () => {
  it('reads the text drawn on a tracked car, and the saved `plates` query lists it under the car\'s track', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'panoptes-plate-'));
    try {
      // The white car of 6.5 s, with a plate drawn where its number plate would be.
      const font = join(root, 'node_modules/dejavu-fonts-ttf/ttf/DejaVuSans-Bold.ttf');
      const plated = join(dir, 'plated.mp4');
      execFileSync(resolveFfmpegPath(), ['-loglevel', 'error', '-ss', '6.5', '-i', clip, '-frames:v', '1', '-vf', `drawbox=x=318:y=262:w=66:h=20:color=white:t=fill,drawtext=fontfile=${font}:text='KA 123':x=322:y=265:fontsize=15:fontcolor=black`, join(dir, 'plated.png')]);
      execFileSync(resolveFfmpegPath(), ['-loglevel', 'error', '-loop', '1', '-i', join(dir, 'plated.png'), '-t', '2', '-r', '4', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', plated]);
      const { plates } = loadApp(join(root, 'configs/apps/traffic.yaml'), loadModelZoo()).queries;
      const { rows } = await runApps(['traffic'], { id: 'plated', path: plated, apps: ['traffic'], fps: 2 }, { plates: plates! });
      expect(rows.plates).toEqual([{ source: 'plated', track_id: '0-0', text: 'KA123', score: expect.any(Number), first_seen: expect.any(String) }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
