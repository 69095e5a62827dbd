import { describe, expect, it } from 'vitest';
import { downgradeToFit, linearProfile, peakThroughput, planEpoch, planViolations, profileLookup, variantsVsDropping, type Variant } from '../../scheduler/index.js';

// Two models with the same cost, each with a variant at half its cost: ℓ(b) = 4b + 10 ms and 2b + 5 ms.
const profileOf = profileLookup([
  linearProfile({ model: 'faces', alphaMs: 4, betaMs: 10, maxBatch: 32 }),
  linearProfile({ model: 'faces-lite', alphaMs: 2, betaMs: 5, maxBatch: 32 }),
  linearProfile({ model: 'cars', alphaMs: 4, betaMs: 10, maxBatch: 32 }),
  linearProfile({ model: 'cars-lite', alphaMs: 2, betaMs: 5, maxBatch: 32 }),
  linearProfile({ model: 'cars-tiny', alphaMs: 1, betaMs: 2, maxBatch: 32 }),
]);
const variants: Variant[] = [
  { model: 'faces-lite', variantOf: 'faces', accuracy: 0.9 },
  { model: 'cars-lite', variantOf: 'cars', accuracy: 0.98 },
  { model: 'cars-tiny', variantOf: 'cars', accuracy: 0.8 },
];
/** Requests/s one device serves of `model` at 100 ms. */
const peak = (model: string): number => peakThroughput(profileOf(model), 100, Infinity)!.throughput;

describe('model variants under a budget (MCDNN)', () => {
  it('downgrades the step that loses least accuracy per device freed first, one rung at a time, until the plan fits', () => {
    // Each session needs 1.2 devices at full accuracy: 2.4 in all, and there are 2.
    const sessions = [
      { id: 'faces@100', model: 'faces', sloMs: 100, rate: 1.2 * peak('faces') },
      { id: 'cars@100', model: 'cars', sloMs: 100, rate: 1.2 * peak('cars') },
    ];
    const fitted = downgradeToFit(sessions, variants, 2, profileOf);
    // Equal rates and equal devices freed: cars (−2 points) goes before faces (−10 points).
    expect(fitted.downgrades.map((d) => `${d.from}→${d.to}`)).toEqual(['cars→cars-lite']);
    expect(fitted.packing.nodes.length).toBeLessThanOrEqual(2);
    expect(fitted.sessions.find((s) => s.id === 'cars@100')).toMatchObject({ model: 'cars-lite', variantOf: 'cars', accuracy: 0.98 });
    expect(fitted.sessions.find((s) => s.id === 'faces@100')).toMatchObject({ model: 'faces', accuracy: 1 });
    expect(planViolations(fitted.packing, fitted.sessions, profileOf, {})).toEqual([]);

    // One device: cars go to their lite variant, then faces (−10 points for 0.6 devices) before cars-tiny (−18 for about 0.3).
    const tight = downgradeToFit(sessions, variants, 1, profileOf);
    expect(tight.downgrades.map((d) => d.to).slice(0, 2)).toEqual(['cars-lite', 'faces-lite']);
    expect(tight.packing.nodes.length).toBeLessThanOrEqual(1);
  });

  it('changes nothing when the plan fits, and stops when no variant frees a device', () => {
    const small = [{ id: 'faces@100', model: 'faces', sloMs: 100, rate: 0.5 * peak('faces') }];
    expect(downgradeToFit(small, variants, 1, profileOf).downgrades).toEqual([]);
    const huge = [{ id: 'faces@100', model: 'faces', sloMs: 100, rate: 10 * peak('faces') }];
    const fitted = downgradeToFit(huge, variants, 1, profileOf);
    expect(fitted.downgrades.map((d) => d.to)).toEqual(['faces-lite']);
    expect(fitted.packing.nodes.length).toBeGreaterThan(1);
  });

  it('the epoch plan names the variant that serves a session, its accuracy, and why', () => {
    const app = (name: string, model: string) => ({ app: name, sloMs: 100, nodes: [{ id: 'n', model }], edges: [{ from: 'frames', to: 'n' }], framesRate: 1.2 * peak(model), gammas: {} });
    const { plan, warnings } = planEpoch({ epoch: 1, nowMs: 0, apps: [app('a', 'faces'), app('b', 'cars')], backends: ['b1', 'b2'] }, profileOf, { epsilonMs: 10, variants });
    const cars = plan.sessions.find((s) => s.variantOf === 'cars');
    expect(cars).toMatchObject({ id: 'cars-lite@100', model: 'cars-lite', accuracy: 0.98, nodes: [{ app: 'b', node: 'n' }] });
    expect(plan.backends.length).toBe(2);
    expect(plan.routing.some((r) => r.session === 'cars-lite@100')).toBe(true);
    expect(warnings.some((w) => w.includes('served by cars-lite instead of cars'))).toBe(true);
    // Where an app runs the variant itself at that SLO, the downgraded session keeps a name of its own: an id names one model.
    const direct = { ...app('c', 'cars-lite'), framesRate: 1 };
    const both = planEpoch({ epoch: 1, nowMs: 0, apps: [app('a', 'faces'), app('b', 'cars'), direct], backends: ['b1', 'b2'] }, profileOf, { epsilonMs: 10, variants }).plan;
    expect(both.sessions.filter((x) => x.model === 'cars-lite').map((x) => x.id).sort()).toEqual(['cars-lite@100', 'cars-lite@100~cars']);
    // Without variants the plan needs a third backend.
    expect(planEpoch({ epoch: 1, nowMs: 0, apps: [app('a', 'faces'), app('b', 'cars')], backends: ['b1', 'b2'] }, profileOf, { epsilonMs: 10 }).warnings.some((w) => w.includes('needs 3 backends'))).toBe(true);
  });
});

describe('variants against dropping in the simulator (panoptes simulate variants)', () => {
  it('past the cluster\'s capacity, serves more requests at a smaller accuracy loss than dropping loses', () => {
    const { loads } = variantsVsDropping();
    const under = loads.find((l) => l.load === 0.8)!;
    expect(under.downgrades).toBe(0);
    expect(under.variantsGoodput).toBe(under.dropGoodput);
    for (const l of loads.filter((x) => x.load >= 1.25)) {
      expect(l.variantsGoodput).toBeGreaterThan(1.2 * l.dropGoodput);
      expect(1 - l.variantsAccuracy).toBeLessThan(1 - l.dropAccuracy);
      expect(l.variantsAccuracy).toBeGreaterThan(0.95);
    }
  });
});
