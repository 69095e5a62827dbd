/**
 * Apps in one deployment share model sessions: the scheduler's query analysis splits each app's
 * SLO over its nodes, and the same model under the same SLO, from any app, is one session. With
 * CPU profiles of this project's 2-core machine (a copy in test/fixtures/profiles, so that
 * measuring the committed ones again does not move the plans tested here), the reference apps' person and vehicle detectors get the same
 * split and run as one CenterNet session; an app whose split differs gets its own, unless the
 * joint split (scheduler/joint-split.ts) saves a device by aligning another app with it.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadApp, loadModelZoo, projectRoot, type AppSpec } from '../../core/index.js';
import { loadProfiles, planEpoch, profileLookup, type AppDemand } from '../../scheduler/index.js';

const root = projectRoot();
const zoo = loadModelZoo();
const profileOf = profileLookup(loadProfiles(join(root, 'test/fixtures/profiles')), 'cpu-amd-epyc-2c');

const demand = (app: AppSpec, framesRate: number, gammas: Record<string, number> = {}): AppDemand => ({
  app: app.name,
  sloMs: app.sloMs,
  nodes: app.nodes.map((n) => ({ id: n.id, model: n.model })),
  edges: app.edges.map((e) => ({ from: e.from, to: e.to })),
  framesRate,
  gammas,
});

const traffic = loadApp(join(root, 'configs/apps/traffic.yaml'), zoo);
const billboard = loadApp(join(root, 'configs/apps/billboard.yaml'), zoo);
const game = loadApp(join(root, 'configs/apps/game.yaml'), zoo);
const lobby = loadApp(join(root, 'docs/examples/lobby.yaml'), zoo);

/** The demo's load: 2 frames/s per app, a plate looked for on half the vehicles, a face on every person. */
const apps = [
  demand(traffic, 2, { 'detect>find-plate': 0.5, 'find-plate>plate': 0.2 }),
  demand(billboard, 2, { 'people>heads': 1, 'heads>faces': 0.5, 'faces>face-attributes': 1 }),
  demand(game, 1, Object.fromEntries(game.edges.filter((e) => e.from !== 'frames').map((e) => [`${e.from}>${e.to}`, 1]))),
  demand(lobby, 2),
];
const sessionsOf = (plan: ReturnType<typeof planEpoch>['plan'], model: string) => plan.sessions.filter((s) => s.model === model);

describe('apps sharing model sessions', () => {
  it('serves the detectors of traffic, billboard and lobby from one CenterNet session when their SLO split agrees', () => {
    const { plan, warnings } = planEpoch({ epoch: 1, nowMs: 0, apps, backends: ['b1', 'b2', 'b3', 'b4'] }, profileOf, { epsilonMs: 10 });
    expect(warnings).toEqual([]);
    const [detector, ...others] = sessionsOf(plan, 'centernet');
    expect(others).toEqual([]);
    expect(detector!.nodes).toEqual([
      { app: 'traffic', node: 'detect' },
      { app: 'billboard', node: 'people' },
      { app: 'lobby', node: 'people' },
    ]);
    // The game's four text detectors share one session too: one model, one SLO.
    expect(sessionsOf(plan, 'ppocr-det').flatMap((s) => s.nodes ?? []).filter((n) => n.app === 'game')).toHaveLength(4);
  });

  it('gives an app whose split differs a session of its own, unless another app can share it and a device is saved', () => {
    const hurried = demand({ ...lobby, name: 'hurried', sloMs: 150 }, 2);
    const { plan, state } = planEpoch({ epoch: 1, nowMs: 0, apps: [...apps, hurried], backends: ['b1', 'b2', 'b3', 'b4', 'b5'] }, profileOf, { epsilonMs: 10 });
    const detectors = sessionsOf(plan, 'centernet');
    const hurriedSession = detectors.find((s) => s.nodes?.some((n) => n.app === 'hurried'))!;
    expect(hurriedSession.sloMs).toBeLessThanOrEqual(150);
    expect(detectors.length).toBeGreaterThan(1);
    // Lobby's own split gives its detector the whole of its SLO; the joint split moves it into hurried's session, which saves a backend.
    expect(state.splits!.lobby!.people).toBe(hurriedSession.sloMs);
    expect(hurriedSession.nodes).toEqual([
      { app: 'lobby', node: 'people' },
      { app: 'hurried', node: 'people' },
    ]);
    const alone = planEpoch({ epoch: 1, nowMs: 0, apps: [...apps.filter((a) => a.app !== 'lobby'), hurried], backends: ['b1', 'b2', 'b3', 'b4', 'b5'] }, profileOf, { epsilonMs: 10 });
    expect(plan.backends.length).toBeLessThanOrEqual(alone.plan.backends.length);
  });
});
