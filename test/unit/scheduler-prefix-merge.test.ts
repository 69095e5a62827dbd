import { describe, expect, it } from 'vitest';
import { linearProfile, mergeSharedPrefixes, profileLookup, squishyBinPacking, type Session } from '../../scheduler/index.js';

const session = (id: string, model: string, sloMs: number, rate: number): Session => ({ id, model, sloMs, rate });
const family = { name: 'resnet-cars+resnet-faces', models: ['resnet-cars', 'resnet-faces'] };
// Per-request cost falls with the batch (β dominates), as on a GPU: one merged session batches both members' requests together.
const gpuLike = [
  linearProfile({ model: 'resnet-cars', alphaMs: 2, betaMs: 40, maxBatch: 32 }),
  linearProfile({ model: 'resnet-faces', alphaMs: 2, betaMs: 40, maxBatch: 32 }),
  linearProfile({ model: 'ssd', alphaMs: 5, betaMs: 20, maxBatch: 32 }),
];
const withFamily = profileLookup([...gpuLike, linearProfile({ model: family.name, alphaMs: 2.2, betaMs: 41, maxBatch: 32 })]);

describe('mergeSharedPrefixes', () => {
  const sessions = [
    session('cars@200', 'resnet-cars', 200, 30),
    session('faces@200', 'resnet-faces', 200, 20),
    session('faces@400', 'resnet-faces', 400, 5),
    session('ssd@200', 'ssd', 200, 10),
  ];

  it('merges sessions of one prefix family and one SLO into one session at the sum of their rates', () => {
    const merge = mergeSharedPrefixes(sessions, [family], withFamily);
    expect(merge.sessions).toEqual([
      { id: 'resnet-cars+resnet-faces@200', model: 'resnet-cars+resnet-faces', sloMs: 200, rate: 50 },
      session('faces@400', 'resnet-faces', 400, 5),
      session('ssd@200', 'ssd', 200, 10),
    ]);
    expect(merge.members['resnet-cars+resnet-faces@200']?.map((s) => s.id)).toEqual(['cars@200', 'faces@200']);
    expect(merge.notes).toEqual([]);
  });

  it('leaves a family without a profile of its own unmerged, and says so', () => {
    const merge = mergeSharedPrefixes(sessions, [family], profileLookup(gpuLike));
    expect(merge.sessions.map((s) => s.id).sort()).toEqual(sessions.map((s) => s.id).sort());
    expect(merge.members).toEqual({});
    expect(merge.notes).toEqual(['cars@200, faces@200 share a prefix (resnet-cars+resnet-faces) but it has no profile; packed apart']);
  });

  it('leaves a family apart where its profile says merging does not pay on the device, and says so', () => {
    // As on a CPU: no gain from the batch (ℓ grows with b as fast as b), and the family's run costs a little more.
    const cpuLike = profileLookup([
      linearProfile({ model: 'resnet-cars', alphaMs: 20, betaMs: 0, maxBatch: 8 }),
      linearProfile({ model: 'resnet-faces', alphaMs: 20, betaMs: 0, maxBatch: 8 }),
      linearProfile({ model: family.name, alphaMs: 21, betaMs: 1, maxBatch: 8 }),
    ]);
    const merge = mergeSharedPrefixes(sessions.slice(0, 2), [family], cpuLike);
    expect(merge.members).toEqual({});
    expect(merge.sessions.map((s) => s.id)).toEqual(['cars@200', 'faces@200']);
    expect(merge.notes).toHaveLength(1);
    expect(merge.notes[0]).toMatch(/^cars@200, faces@200 share a prefix \(resnet-cars\+resnet-faces\) but merging does not pay on this device: [\d.]+ GPUs busy merged against [\d.]+ apart; packed apart$/);
  });

  it('changes nothing without families', () => {
    expect(mergeSharedPrefixes(sessions, [], withFamily)).toEqual({ sessions, members: {}, notes: [] });
  });

  it('lets the packer place the merged session at a batch neither member reaches alone', () => {
    const pair = sessions.slice(0, 2);
    const apart = squishyBinPacking(pair, withFamily);
    const merged = squishyBinPacking(mergeSharedPrefixes(pair, [family], withFamily).sessions, withFamily);
    const busy = (packing: typeof apart): number =>
      packing.nodes.reduce((sum, node) => sum + node.sessions.reduce((s, x) => s + withFamily(x.model).latency(x.batch) / node.dutyCycleMs, 0), 0);
    expect(merged.nodes).toHaveLength(1);
    expect(busy(merged)).toBeLessThan(busy(apart));
  });
});
