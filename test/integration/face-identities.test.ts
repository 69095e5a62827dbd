/**
 * Face identities in the pipeline (docs/examples/audience-identities.yaml): the billboard's faces
 * in face-demographics-walking.gif (a woman, then a man, walking towards the camera), played three
 * times over, so the same two people come by three times. Each face is given an identity from
 * FaceRes' descriptor, the node specialized with a MobileFace template. What it checks: every
 * face answered once with an identity; each visit's `track` event names one; the person whose
 * face is confirmed most is one identity on each pass. (FaceMesh confirms few of the man's
 * faces in this clip; test/unit/face-identities.test.ts tells people apart on stills.) The shared
 * footage has too few faces for WEG to specialize on (91 usable faces of 3 people in all the
 * clips; docs/specialization.md).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';
import { exampleApp, loopedClip, runApps } from './run-app.js';

const root = projectRoot();
const clip = join(root, '../shared/footage/face-demographics-walking.gif');

describe.skipIf(!existsSync(clip))('face identities on face-demographics-walking.gif, three times over (needs ../shared/footage)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-identities-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('gives every face an identity, writes it into each visit, and knows a person who comes back', async () => {
    const looped = loopedClip(dir, clip, 3);
    // Scaled down to the clip: a window of 10, 10 pool rows an identity.
    const file = exampleApp(dir, 'audience-identities', (node) => Object.assign(node('identity').specialize!, { minWindow: 10, poolRowsPerClass: 10 }));

    const { summary, rows } = await runApps([file], { id: 'walkway', path: looped, apps: ['audience-identities'], fps: 12 }, {
      faces: "SELECT count() AS n FROM detections WHERE app = 'audience-identities' AND node = 'faces'",
      identities: "SELECT value, count() AS n FROM recognitions WHERE node = 'identity' AND name = 'identity' GROUP BY value ORDER BY n DESC",
      answers: "SELECT answered_by, count() AS n, uniqExact(object_id) AS objects FROM recognitions WHERE node = 'identity' GROUP BY answered_by ORDER BY answered_by",
      visits: "SELECT track_id, JSONExtractString(value, 'identity') AS identity FROM events WHERE event = 'track' AND visitParamExtractUInt(value, 'faces') > 0 ORDER BY frame_time",
      stats: "SELECT stream, argMax(special_rate, at) AS special_rate, argMax(transitions, at) AS transitions FROM session_stats WHERE session = 'audience-identities/identity' GROUP BY stream",
    });
    console.log(`face identities: ${JSON.stringify(rows)}; drops ${summary.drops}`);
    expect(summary.drops).toBe(0);

    // One identity per confirmed face, each answered once.
    const answers = rows.answers as { answered_by: string; n: number; objects: number }[];
    const total = answers.reduce((n, a) => n + Number(a.n), 0);
    expect(total).toBe(Number(rows.faces![0]!.n));
    expect(total).toBeGreaterThanOrEqual(6);
    for (const a of answers) expect(['cascade', 'fall-through', 'oracle']).toContain(a.answered_by);
    // Each visit on which a face was seen names an identity; the person seen most, who comes by on
    // each pass, is one identity over several visits.
    const visits = rows.visits as { track_id: string; identity: string }[];
    for (const v of visits) expect(v.identity).toMatch(/^person-[0-9a-f]{6}-\d+$/);
    const identities = rows.identities as { value: string; n: number }[];
    for (const i of identities) expect(i.value).toMatch(/^person-[0-9a-f]{6}-\d+$/);
    expect(visits.filter((v) => v.identity === identities[0]!.value).length).toBeGreaterThanOrEqual(2);

    expect((rows.stats as { stream: string }[]).map((s) => s.stream)).toEqual(['walkway']);
  }, 300_000);
});
