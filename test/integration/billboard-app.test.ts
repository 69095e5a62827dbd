/**
 * Ground truth for the billboard app. Visits and dwell times on one-by-one-person-detection.mp4
 * are labelled by hand in test/fixtures/labels/one-by-one-person-detection.json (the file says
 * how). Tolerance: a visit's arrival within 1.5 s of its label and its dwell within 2.5 s. The
 * labels run from the first to the last half second on which any part of the person shows (a
 * head at the bottom edge, a foot at the right edge), which a person detector cannot see; at 2
 * frames per second a frame is 0.5 s, so each end can be off by a frame or two.
 *
 * The worked example of docs/apps.md (docs/examples/lobby.yaml) runs beside it on the same
 * frames: the two apps' person detectors are one model session.
 *
 * Faces, attention and attributes: face-demographics-walking.gif, two people walking towards the
 * camera. On the clip, where everyone has their back to the camera, BlazeFace alone took the backs
 * of five heads for faces; FaceMesh confirms none of them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';
import { runApps } from './run-app.js';

const root = projectRoot();
const clip = join(root, '../shared/footage/one-by-one-person-detection.mp4');
const gif = join(root, '../shared/footage/face-demographics-walking.gif');
const labels = JSON.parse(readFileSync(join(root, 'test/fixtures/labels/one-by-one-person-detection.json'), 'utf8')) as {
  visits: { arrives: number; dwellS: number }[];
};
const FPS = 2;
const ARRIVAL_TOLERANCE_S = 1.5;
const DWELL_TOLERANCE_S = 2.5;

describe.skipIf(!existsSync(clip))('the billboard app on one-by-one-person-detection.mp4 (needs ../shared/footage)', () => {
  it('finds the six hand-labelled visits with their dwell times; the lobby example, beside it on one detector session, counts six people in', async () => {
    const { summary, rows } = await runApps(['billboard', join(root, 'docs/examples/lobby.yaml')], { id: 'lobby-door', path: clip, apps: ['billboard'], fps: FPS }, {
      visits: "SELECT frame_seq, duration_ms, value FROM events WHERE app = 'billboard' AND event = 'track' ORDER BY frame_seq",
      audience: "SELECT people, looked FROM (SELECT source, count() AS people, countIf(visitParamExtractUInt(value, 'faces') > 0) AS looked FROM events WHERE app = 'billboard' AND event = 'track' GROUP BY source)",
      lobby: "SELECT event, name, direction, count() AS n FROM events WHERE app = 'lobby' AND event != 'track' GROUP BY event, name, direction ORDER BY event, name, direction",
      people: "SELECT app, count() AS n FROM detections WHERE node = 'people' GROUP BY app ORDER BY app",
      sessions: "SELECT DISTINCT session FROM session_stats WHERE arrival_rate > 0 ORDER BY session",
    });
    expect(summary.drops).toBe(0);
    const visits = rows.visits as { frame_seq: number; duration_ms: number; value: string }[];
    console.log(`billboard visits at ${FPS} fps: ${JSON.stringify(visits.map((v) => ({ arrives: Number(v.frame_seq) / FPS, dwellS: Number(v.duration_ms) / 1000 })))}`);

    expect(visits).toHaveLength(labels.visits.length);
    visits.forEach((visit, i) => {
      const label = labels.visits[i]!;
      expect(Math.abs(Number(visit.frame_seq) / FPS - label.arrives)).toBeLessThanOrEqual(ARRIVAL_TOLERANCE_S);
      expect(Math.abs(Number(visit.duration_ms) / 1000 - label.dwellS)).toBeLessThanOrEqual(DWELL_TOLERANCE_S);
    });
    // Everyone faces the table, their back to the camera: nobody looked.
    expect(rows.audience).toEqual([{ people: 6, looked: 0 }]);

    // The worked example: six people in past the entrance line, and six stays at the table.
    expect(rows.lobby).toEqual([
      { event: 'dwell', name: 'table', direction: '', n: 6 },
      { event: 'line_crossing', name: 'entrance', direction: 'in', n: 6 },
    ]);
    // One person-detector session served both apps, and both saw the same people.
    const [billboard, lobby] = rows.people as { app: string; n: number }[];
    expect(billboard!.n).toBe(lobby!.n);
    expect((rows.sessions as { session: string }[]).map((s) => s.session).filter((s) => s.startsWith('centernet'))).toEqual(['centernet']);
  }, 300_000);
});

describe.skipIf(!existsSync(gif))('the billboard app on face-demographics-walking.gif (needs ../shared/footage)', () => {
  it('sees both people look, and reads ages of adults from their faces', async () => {
    const { rows } = await runApps(['billboard'], { id: 'walkway', path: gif, apps: ['billboard'], fps: 12 }, {
      visits: "SELECT track_id, value FROM events WHERE app = 'billboard' AND event = 'track' ORDER BY track_id",
      attributes: "SELECT name, count() AS n FROM recognitions WHERE app = 'billboard' AND kind = 'attribute' AND track_id != '' GROUP BY name ORDER BY name",
    });
    const visits = (rows.visits as { value: string }[]).map((v) => JSON.parse(v.value) as { frames: number; seen: Record<string, number>; age?: number; gender?: string });
    console.log(`billboard on the walkway: ${JSON.stringify(visits)}`);
    expect(visits).toHaveLength(2);
    for (const v of visits) {
      // Their faces are 12 to 36 px high: FaceMesh confirms one on a few frames of each person,
      // and age and gender are read from those.
      expect(v.seen.heads).toBeGreaterThan(v.frames / 2);
      expect(v.seen.faces).toBeGreaterThan(0);
      expect(v.seen['face-attributes']).toBe(v.seen.faces);
      expect(v.age).toBeGreaterThanOrEqual(18);
      expect(v.age).toBeLessThanOrEqual(70);
      expect(v.gender).toBeDefined();
    }
    const [age, gender] = rows.attributes as { name: string; n: number }[];
    expect(age).toEqual({ name: 'age', n: gender!.n });
    expect(gender!.n).toBeGreaterThanOrEqual(visits[0]!.seen.faces! + visits[1]!.seen.faces!);
  }, 300_000);
});
