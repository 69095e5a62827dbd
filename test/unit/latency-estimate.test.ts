import { describe, expect, it } from 'vitest';
import { createLatencyEstimate, profiledLatency } from '../../analyzers/backend/latency-estimate.js';
import { budgetUpTo, evenSloSplit, stageDeadlineMs } from '../../analyzers/index.js';

describe('ℓ(b) from a plan', () => {
  it('reads the profile at the batches it has, and extends its last step beyond them', () => {
    const latency = profiledLatency([25, 30, 35]);
    expect([1, 2, 3].map(latency)).toEqual([25, 30, 35]);
    expect(latency(5)).toBe(45);
    expect(profiledLatency([40])(3)).toBe(120);
  });
});

describe('ℓ(b) learned from the batches run', () => {
  it('averages each size, draws the line between sizes, and lets a size not run for a while stand aside for fresher ones', () => {
    let nowMs = 0;
    const estimate = createLatencyEstimate({ weight: 0.5, staleMs: 1000, now: () => nowMs });
    expect(estimate.latency(4)).toBe(0);
    estimate.observe(1, 20);
    estimate.observe(1, 30);
    expect(estimate.latency(1)).toBe(25);
    expect(estimate.latency(3)).toBe(75); // one size: in proportion
    // A slow spell at batch 8.
    estimate.observe(8, 400);
    expect(estimate.latency(8)).toBe(400);
    expect(estimate.latency(4)).toBeCloseTo(25 + (375 / 7) * 3, 10);
    // Later only batches of 1 and 2 run, at their usual cost: the old figure for 8 stands aside.
    nowMs = 2000;
    estimate.observe(1, 25);
    estimate.observe(2, 45);
    expect(estimate.latency(8)).toBe(25 + 20 * 7);
    // With nothing fresh, the old figures are all there is.
    nowMs = 10_000;
    expect(estimate.latency(8)).toBe(400);
  });

  it('gives the time per input at the batch size run last', () => {
    const estimate = createLatencyEstimate({ weight: 0.5 });
    expect(estimate.perInput()).toBeUndefined();
    estimate.observe(4, 100);
    expect(estimate.perInput()).toBe(25);
    estimate.observe(1, 30);
    expect(estimate.perInput()).toBe(30);
    estimate.observe(4, 60);
    expect(estimate.perInput()).toBe(20);
  });
});

describe('stage deadlines', () => {
  /** frames → detect → (read, describe); read → check. */
  const app = {
    sloMs: 900,
    nodes: [{ id: 'detect' }, { id: 'read' }, { id: 'describe' }, { id: 'check' }],
    edges: [
      { from: 'frames', to: 'detect' },
      { from: 'detect', to: 'read' },
      { from: 'detect', to: 'describe' },
      { from: 'read', to: 'check' },
    ],
  };

  it('sums the budgets from the root down to the stage', () => {
    const budgets = { detect: 500, read: 250, describe: 100, check: 150 };
    expect(budgetUpTo(app, budgets, 'detect')).toBe(500);
    expect(budgetUpTo(app, budgets, 'describe')).toBe(600);
    expect(budgetUpTo(app, budgets, 'check')).toBe(900);
    expect(stageDeadlineMs(10_000, budgetUpTo(app, budgets, 'read'))).toBe(10_750);
  });

  it('waits for the later parent where two meet, and names a node without a budget', () => {
    const fanIn = { ...app, edges: [...app.edges, { from: 'describe', to: 'check' }] };
    expect(budgetUpTo(fanIn, { detect: 500, read: 250, describe: 300, check: 100 }, 'check')).toBe(900);
    expect(() => budgetUpTo(app, { detect: 500 }, 'read')).toThrow('no stage budget for node read');
  });

  it('splits evenly by the deepest path before a plan gives budgets', () => {
    expect(evenSloSplit(app)).toEqual({ detect: 300, read: 300, describe: 300, check: 300 });
  });
});
