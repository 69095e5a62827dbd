import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdentityGallery, createOnnxRuntime, cropImage, decodeJpeg, loadModelRunner, type ModelRunner, type RgbImage } from '../../analyzers/index.js';
import { loadModelZoo, projectRoot, silentLogger, type NodeOutput } from '../../core/index.js';

describe('identities enrolled online (leader clustering of face descriptors)', () => {
  it('joins the nearest identity from the threshold, starts one below it, and never reuses an id', () => {
    const gallery = createIdentityGallery({ sameIdentity: 0.7, maxIdentities: 3 });
    const identify = (...v: number[]) => gallery.identify(Float32Array.from(v))!;
    // A face that starts an identity scores the threshold: no match is surer than the one it missed.
    expect(identify(1, 0, 0)).toEqual({ id: 'person-1', similarity: 0.7 });
    // cos 0.8 with person-1: joins it; its centre is now along (1.8, 0.6, 0).
    expect(identify(0.8, 0.6, 0)).toEqual({ id: 'person-1', similarity: expect.closeTo(0.8, 6) });
    // cos 0.6 / |(1.8, 0.6)| = 0.316 with that centre: a new identity.
    expect(identify(0, 1, 0)).toEqual({ id: 'person-2', similarity: 0.7 });
    // Scaled to unit length first.
    expect(identify(0, 0, 2)).toEqual({ id: 'person-3', similarity: 0.7 });
    expect(identify(1, 0, 0)).toEqual({ id: 'person-1', similarity: expect.closeTo(1.8 / Math.hypot(1.8, 0.6), 6) });
    // A fourth lets the one seen longest ago (person-2) go; its face then starts a fifth.
    expect(identify(-1, 0, 0).id).toBe('person-4');
    expect(gallery.size).toBe(3);
    expect(identify(0, 1, 0).id).toBe('person-5');
    expect(() => identify(1, 0)).toThrow('identity gallery: a 2-d descriptor among 3-d ones');
    // A descriptor of zeros or not-numbers is no face: no identity, none enrolled.
    expect(gallery.identify(new Float32Array(3))).toBeUndefined();
    expect(gallery.identify(Float32Array.of(NaN, 1, 0))).toBeUndefined();
    expect(identify(0, 0, -1).id).toBe('person-6');
  });
});

describe('face-identity and mobileface: identities of face crops', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const zoo = loadModelZoo();
  const names = ['face-walking-01', 'face-walking-18', 'face-walking-35', 'face-classroom-15', 'back-of-head-1', 'room-person'];
  let images: RgbImage[] = [];
  const runners: ModelRunner[] = [];
  beforeAll(async () => {
    images = await Promise.all(names.map(async (n) => decodeJpeg(readFileSync(join(projectRoot(), `test/fixtures/images/${n}.jpg`)))));
  });
  afterAll(async () => {
    for (const r of runners) await r.dispose();
    await runtime.close();
  });
  const identities = (outputs: NodeOutput[]) => outputs.map((o) => (o.kind === 'attributes' ? o.attributes[0]?.value : o.kind));
  /** Ids renamed 1, 2, ... in order of first appearance: which faces share an identity. */
  const grouping = (ids: readonly (string | undefined)[]) => ids.map((id) => [...new Set(ids)].indexOf(id) + 1);

  it.each([
    ['face-identity', 1024],
    ['mobileface', 256],
  ])('%s: one person walking is one identity, other pictures others; a node keeps its identities across batches; features are unit descriptors', async (model, width) => {
    const runner = await loadModelRunner(zoo[model]!, runtime);
    runners.push(runner);
    const params = images.map(() => runner.parseParams({}));
    const run = async (batch: readonly RgbImage[], stream: string) => runner.finish(await runner.execute(await runner.prepare(batch, params.slice(0, batch.length), batch.map(() => stream))));
    const first = await run(images, 'billboard/identity/lobby');
    const ids = identities(first);
    expect(grouping(ids)).toEqual([1, 1, 1, 2, 3, 4]);
    // A tag of the node's gallery, then a number: two processes enrolling for one node never share an id.
    for (const id of ids) expect(id).toMatch(/^person-[0-9a-f]{6}-[1-4]$/);
    for (const o of first) {
      const features = (o as { features: Float32Array }).features;
      expect(features).toHaveLength(width);
      expect(Math.hypot(...features)).toBeCloseTo(1, 4);
    }
    // The same faces a few pixels off, from another camera of the same node: the same identities.
    const shifted = await Promise.all(images.map((im) => cropImage(im, { x1: 3, y1: 3, x2: im.width - 2, y2: im.height - 4 })));
    expect(identities(await run(shifted, 'billboard/identity/door'))).toEqual(identities(first));
    // Another node enrols its own; a specialization template's runs enrol none.
    const other = identities(await run(images.slice(3), 'other/identity/lobby'));
    expect(grouping(other)).toEqual([1, 2, 3]);
    for (const id of other) expect(ids).not.toContain(id);
    const template = await run(images.slice(0, 2), 'billboard/identity~mobileface/lobby');
    expect(template.map((o) => (o.kind === 'attributes' ? [o.attributes.length, o.features?.length] : []))).toEqual([
      [0, width],
      [0, width],
    ]);
    // A runner loaded again (a plan unloads and reloads it) keeps the node's identities.
    const again = await loadModelRunner(zoo[model]!, runtime);
    runners.push(again);
    const reloaded = await again.finish(await again.execute(await again.prepare(images.slice(0, 1), params.slice(0, 1), ['billboard/identity/lobby'])));
    expect(identities(reloaded)).toEqual([ids[0]]);
    expect(() => runner.parseParams({ sameIdentity: 2 })).toThrow(/sameIdentity/);
  });
});
