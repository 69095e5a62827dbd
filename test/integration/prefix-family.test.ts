/**
 * Prefix families (Nexus §6.3) as a backend runs them: CenterNet and a variant with its own head
 * (the last class and box convolutions changed, `tools/prefix-heads`) are found to share a
 * prefix, and their family's runner gives each request what its member's own runner gives.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime, decodeJpeg, findPrefixFamilies, loadModelRunner, readOnnxModel, type ModelRunner, type RgbImage } from '../../analyzers/index.js';
import { runDeployment } from '../../cli/deployment.js';
import { prefixFamilies } from '../../cli/run-setup.js';
import { compileDeployment, deploymentSchema, loadModelZoo, projectRoot, silentLogger, type CompiledConfig, type Detection, type NodeOutput, type ResolvedModel } from '../../core/index.js';
import { writeHeads } from '../../tools/prefix-heads/index.js';

const root = projectRoot();
const zoo = loadModelZoo();
const scratch = mkdtempSync(join(tmpdir(), 'panoptes-prefix-family-'));
const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1 });
afterAll(async () => {
  await runtime.close();
  rmSync(scratch, { recursive: true, force: true });
});

const detections = (output: NodeOutput | undefined): Detection[] => (output?.kind === 'detections' ? output.detections : []);

describe('a prefix family of CenterNet heads', () => {
  let members: ResolvedModel[];
  let family: ResolvedModel;
  let alone: ModelRunner[];
  let together: ModelRunner;
  let stills: RgbImage[];

  beforeAll(async () => {
    const { models } = await writeHeads(await readOnnxModel(zoo.centernet!.file), scratch, { heads: 2, scale: 0.3 });
    members = models.map((file, i) => ({ ...zoo.centernet!, name: i === 0 ? 'centernet' : 'centernet-b', file }));
    const found = await findPrefixFamilies([...members, zoo.blazeface!, zoo.faceres!]);
    expect(found.map((f) => f.name)).toEqual(['centernet+centernet-b']);
    family = found[0]!;
    alone = await Promise.all(members.map((m) => loadModelRunner(m, runtime)));
    together = await loadModelRunner(family, runtime);
    stills = await Promise.all(['room-person.jpg', 'road-two-cars.jpg'].map((f) => decodeJpeg(readFileSync(join(root, 'test/fixtures/images', f)))));
  }, 120_000);
  afterAll(async () => {
    await Promise.all([...alone, together].map((r) => r.dispose()));
  });

  it('finds no family among models of different architectures, nor in one network listed twice', async () => {
    expect(await findPrefixFamilies([zoo.centernet!, zoo.blazeface!, zoo.faceres!, zoo.facemesh!])).toEqual([]);
    expect(await findPrefixFamilies([zoo.centernet!, { ...zoo.centernet!, name: 'centernet-again' }])).toEqual([]);
  });

  it('leaves out of families a model that a node runs with a learned cache (its caches cut its own graph)', async () => {
    const models = Object.fromEntries(members.map((m) => [m.name, m]));
    const configWith = (cache?: object) =>
      ({ apps: { road: { nodes: [{ id: 'a', model: 'centernet' }, { id: 'b', model: 'centernet-b', ...(cache ? { cache } : {}) }] } }, models }) as unknown as CompiledConfig;
    expect((await prefixFamilies(configWith(), silentLogger())).map((f) => f.name)).toEqual(['centernet+centernet-b']);
    expect(await prefixFamilies(configWith({}), silentLogger())).toEqual([]);
  });

  it("answers each request of a mixed batch as its member's own runner does", async () => {
    const params = members.map((_, i) => alone[i]!.parseParams({}));
    const expected = await Promise.all(members.map((_, i) => alone[i]!.run(stills, stills.map(() => params[i]))));
    // One batch: both stills for each member, interleaved.
    const order = [0, 1, 0, 1].map((member, k) => ({ member, still: Math.floor(k / 2) }));
    const outputs = await together.run(
      order.map((o) => stills[o.still]!),
      order.map((o) => ({ member: members[o.member]!.name, params: params[o.member] })),
    );
    order.forEach((o, k) => {
      const got = detections(outputs[k]);
      const want = detections(expected[o.member]![o.still]);
      expect(got.map((d) => d.className), `request ${k}`).toEqual(want.map((d) => d.className));
      got.forEach((d, j) => expect(Math.abs(d.score - want[j]!.score)).toBeLessThan(1e-3));
    });
    // The heads differ: the members do not answer alike.
    expect(JSON.stringify(expected[0])).not.toEqual(JSON.stringify(expected[1]));
  }, 60_000);

  it('runs a batch of one member only, and spreads requests without a member over the members', async () => {
    const params = alone[1]!.parseParams({});
    const [only] = await together.run([stills[1]!], [{ member: 'centernet-b', params }]);
    expect(detections(only)).toEqual(detections((await alone[1]!.run([stills[1]!], [params]))[0]));
    const spread = await together.run([stills[1]!, stills[1]!], [together.parseParams({}), together.parseParams({})]);
    const [first, second] = await Promise.all(alone.map(async (r) => (await r.run([stills[1]!], [r.parseParams({})]))[0]));
    expect(detections(spread[0]).map((d) => d.className)).toEqual(detections(first).map((d) => d.className));
    expect(detections(spread[1]).map((d) => d.className)).toEqual(detections(second).map((d) => d.className));
  }, 60_000);

  it('BAD INPUT: a request for a model outside the family is PANOPTES_MODEL_RUN, and the family keeps serving', async () => {
    await expect(together.run([stills[0]!], [{ member: 'blazeface', params: {} }])).rejects.toMatchObject({ code: 'PANOPTES_MODEL_RUN', message: expect.stringContaining('blazeface') });
    const params = alone[0]!.parseParams({});
    expect((await together.run([stills[0]!], [{ member: 'centernet', params }])).length).toBe(1);
  }, 60_000);
});

describe('a prefix family in a deployment', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-family-deployment-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /**
   * Profiles on a made-up device where batching pays (ℓ(b) = 2b + 40 ms): the family's a little
   * dearer per run, measured up to batch 8, the members' up to 4, so merging pays at any rate.
   */
  const profile = (model: string, alphaMs: number, betaMs: number, maxBatch: number) => ({
    model,
    device: 'test-gpu',
    batches: Array.from({ length: maxBatch }, (_, i) => ({ batch: i + 1, latencyMs: alphaMs * (i + 1) + betaMs, stdMs: 0, memoryMB: 100 })),
  });

  it('merges two apps\' sessions of one SLO into the family\'s, hosted as one model, with rows for both apps', async () => {
    const { models } = await writeHeads(await readOnnxModel(zoo.centernet!.file), dir, { heads: 2, scale: 0.3 });
    const entry = (name: string, file: string) => `  - { name: ${name}, task: detect-objects, architecture: centernet, file: ${file}, inputSize: 512, labels: coco, maxBatch: 8, license: MIT }\n`;
    writeFileSync(join(dir, 'models.yaml'), `models:\n${entry('centernet', models[0]!)}${entry('centernet-b', models[1]!)}`);
    mkdirSync(join(dir, 'apps'));
    for (const [app, model] of [['north', 'centernet'], ['south', 'centernet-b']]) {
      writeFileSync(join(dir, `apps/${app}.yaml`), `name: ${app}\nsloMs: 4000\nnodes: [{ id: detect, model: ${model} }]\nedges: [{ from: frames, to: detect }]\n`);
    }
    mkdirSync(join(dir, 'profiles'));
    for (const p of [profile('centernet', 2, 40, 4), profile('centernet-b', 2, 40, 4), profile('centernet+centernet-b', 2.2, 41, 8)]) {
      writeFileSync(join(dir, `profiles/test-gpu.${p.model}.json`), JSON.stringify(p));
    }
    const config = compileDeployment(
      deploymentSchema.parse({
        apps: ['apps/north.yaml', 'apps/south.yaml'],
        // Long enough that frames still arrive once the first plan is out: the scheduler plans from
        // the rates it observes, a few seconds in, and later still on a loaded machine.
        sources: [{ id: 'card', synthetic: { lavfi: 'testsrc2=size=320x180:rate=5', durationS: 20 }, fps: 2, speed: 1, apps: ['north', 'south'] }],
        scheduler: { profiles: 'profiles', device: 'test-gpu', minEpochS: 1 },
      }),
      join(dir, 'deployment.yaml'),
      { dataDir: join(dir, 'data') },
    );
    let plans: Record<string, unknown>[] = [];
    let served: Record<string, unknown>[] = [];
    let frames: Record<string, unknown>[] = [];
    const summary = await runDeployment(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        plans = (await sink.query('SELECT DISTINCT session, model FROM plans')).rows;
        served = (await sink.query("SELECT session, sum(batches) AS batches FROM session_stats WHERE session LIKE 'centernet+centernet-b@%' GROUP BY session")).rows;
        frames = (await sink.query('SELECT app, count() AS n FROM frames GROUP BY app ORDER BY app')).rows;
      },
    });
    expect(plans).toEqual([{ session: expect.stringMatching(/^centernet\+centernet-b@\d+$/), model: 'centernet+centernet-b' }]);
    expect(Number(served[0]?.batches)).toBeGreaterThan(0);
    expect(frames.map((f) => f.app)).toEqual(['north', 'south']);
    // Every frame accounted for in each app: a row, or on a loaded machine a drop at its deadline.
    const [north, south] = frames.map((f) => Number(f.n)) as [number, number];
    expect(north).toBeGreaterThan(0);
    expect(south).toBeGreaterThan(0);
    expect(north + south + summary.drops).toBe(2 * summary.sources[0]!.frames);
    expect(summary.drops).toBe(summary.deadlineDrops);
  }, 180_000);
});
