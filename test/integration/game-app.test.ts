/**
 * Ground truth for the game app: the demo's synthetic game stream draws its HUD numbers from
 * known formulas of the frame's time t (see configs/demo.yaml), so every sampled frame has an
 * exact expected reading. The app must read all four numbers right on at least 98% of frames,
 * and its change events must follow the counters.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDeployment } from '../../cli/deployment.js';
import { compileDeployment, deploymentSchema, loadDeployment, projectRoot, silentLogger } from '../../core/index.js';

const root = projectRoot();
/** Every 5th frame of the 10 fps clip: frame k shows the HUD at t = k / 2 exactly (the `fps` filter would take the last frame before (k + ½) / 2). */
const EVERY_NTH = 5;
const FPS = 2;
const SECONDS = 30;

/** What the HUD shows at time t (s), as the demo's drawtext expressions compute it. */
function hudAt(t: number): Record<string, string> {
  const left = Math.floor(300 - t);
  return {
    score: String(10 * Math.floor(t * 2.5)),
    kills: String(Math.floor(t / 2)),
    alive: String(100 - Math.floor(t * 0.7)),
    timer: `${String(Math.floor(left / 60)).padStart(2, '0')}:${String(left % 60).padStart(2, '0')}`,
  };
}

describe('the game app on synthetic game footage with a drawn HUD', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-game-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('reads the HUD numbers right on at least 98% of sampled frames, and makes an event per change', async () => {
    const demo = loadDeployment(join(root, 'configs/demo.yaml'));
    const hud = demo.sources.find((s) => s.id === 'game-hud')!;
    const deployment = deploymentSchema.parse({
      models: join(root, 'configs/models.yaml'),
      apps: [join(root, 'configs/apps/game.yaml')],
      sources: [{ id: 'game-hud', synthetic: { lavfi: hud.synthetic!.lavfi, durationS: SECONDS }, apps: ['game'], sample: { everyNth: EVERY_NTH } }],
    });
    const config = compileDeployment(deployment, join(root, 'configs/test.yaml'), { dataDir });

    let readings: { frame_seq: number; name: string; value: string }[] = [];
    let events: { name: string; value: string; previous: string; frame_seq: number }[] = [];
    let saved: Record<string, unknown>[] = [];
    const summary = await runDeployment(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        readings = (await sink.query("SELECT frame_seq, name, value FROM recognitions WHERE app = 'game' AND kind = 'field' ORDER BY frame_seq, name")).rows as typeof readings;
        events = (await sink.query("SELECT name, value, previous, frame_seq FROM events WHERE app = 'game' AND event = 'change' ORDER BY name, frame_seq")).rows as typeof events;
        saved = (await sink.query("SELECT source, max(number) AS kills FROM recognitions WHERE app = 'game' AND kind = 'field' AND name = 'kills' GROUP BY source")).rows;
      },
    });
    expect(summary.sources.map((s) => s.error)).toEqual([undefined]);
    expect(summary.drops).toBe(0);

    const frames = SECONDS * FPS;
    const fields = ['score', 'kills', 'alive', 'timer'];
    let framesRight = 0;
    const wrong: string[] = [];
    const rightByField = Object.fromEntries(fields.map((f) => [f, 0]));
    for (let seq = 0; seq < frames; seq++) {
      const expected = hudAt(seq / FPS);
      const read = Object.fromEntries(readings.filter((r) => Number(r.frame_seq) === seq).map((r) => [r.name, r.value]));
      let all = true;
      for (const field of fields) {
        if (read[field] === expected[field]) rightByField[field]! += 1;
        else {
          all = false;
          wrong.push(`frame ${seq} ${field}: read ${read[field] ?? '(nothing)'}, shown ${expected[field]}`);
        }
      }
      if (all) framesRight += 1;
    }
    const accuracy = framesRight / frames;
    console.log(`game HUD: ${framesRight}/${frames} frames read right (${(accuracy * 100).toFixed(1)}%); by field ${JSON.stringify(rightByField)}${wrong.length ? `; misreads: ${wrong.slice(0, 20).join('; ')}` : ''}`);
    expect(accuracy).toBeGreaterThanOrEqual(0.98);

    // Kills go 0, 1, ..., 14 over 30 s: one event per value, the first with no previous value.
    const kills = events.filter((e) => e.name === 'kills');
    expect(kills.map((e) => e.value)).toEqual(Array.from({ length: SECONDS / 2 }, (_, i) => String(i)));
    expect(kills[0]!.previous).toBe('');
    expect(kills[3]).toMatchObject({ previous: '2', value: '3', frame_seq: 3 * 2 * FPS });
    expect(saved).toEqual([{ source: 'game-hud', kills: SECONDS / 2 - 1 }]);
  }, 300_000);
});
