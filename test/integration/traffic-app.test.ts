/**
 * Ground truth for the traffic app: the cars crossing the middle of car-detection.mp4, labelled
 * by hand in test/fixtures/labels/car-detection.json (the file says how).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';
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
      crossings: "SELECT class, direction, frame_seq, track_id FROM events WHERE app = 'traffic' AND event = 'line_crossing' ORDER BY frame_seq",
      saved: "SELECT class, direction, count() AS count FROM events WHERE app = 'traffic' AND event = 'line_crossing' GROUP BY class, direction ORDER BY class, direction",
      untracked: "SELECT count() AS n FROM detections WHERE app = 'traffic' AND track_id = ''",
    });
    expect(summary.drops).toBe(0);
    const crossings = rows.crossings as { class: string; direction: string; frame_seq: number; track_id: string }[];
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
