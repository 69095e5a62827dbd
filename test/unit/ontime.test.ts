import { describe, expect, it } from 'vitest';
import { catchUpMs, completionTimePlan, edfBatch, nextStep, tardyPlan, type ActiveRequest, type OnTimePlan, type StagedLatency } from '../../analyzers/index.js';
import { lteLikeLink, onTimeRatio, seededRandom } from '../../scheduler/index.js';

/** h_k(b) = 2 + b ms per stage: batching pays (the per-request part is half of a lone run). */
const staged = (stages: number, maxBatch = Infinity): StagedLatency => ({ stages, maxBatch, latencyMs: (_k, b) => 2 + b });

/** What a segment takes, worked out the slow way: stage by stage, the batch is every member already there. */
function segmentMs(members: readonly ActiveRequest[], latency: StagedLatency): number {
  let total = 0;
  for (let k = Math.min(...members.map((m) => m.stage)); k < latency.stages; k++) total += latency.latencyMs(k, members.filter((m) => m.stage <= k).length);
  return total;
}

/** The least Σ completion over every split of the FIFO order into consecutive segments of at most B, by enumeration. */
function bruteForceBest(requests: readonly ActiveRequest[], latency: StagedLatency): number {
  const order = [...requests].sort((a, b) => b.stage - a.stage || a.deadlineMs - b.deadlineMs);
  let best = Infinity;
  for (let cuts = 0; cuts < 2 ** Math.max(0, order.length - 1); cuts++) {
    let [start, clock, total, fits] = [0, 0, 0, true];
    for (let i = 0; i < order.length; i++) {
      const last = i === order.length - 1 || (cuts & (1 << i)) !== 0;
      if (!last) continue;
      const segment = order.slice(start, i + 1);
      if (segment.length > latency.maxBatch) fits = false;
      clock += segmentMs(segment, latency);
      total += clock * segment.length;
      start = i + 1;
    }
    if (fits) best = Math.min(best, total);
  }
  return best;
}

/** Σ completion of a plan's segments, from 0. */
const planTotal = (plan: ReturnType<typeof completionTimePlan>): number => plan.segments.reduce((sum, s) => sum + s.endMs * s.members.length, 0);

/** Runs a policy's plans step by step (each step one stage of the first segment's shallowest members) until nothing is left; returns the requests done on time. */
function runToEnd(initial: readonly ActiveRequest[], latency: StagedLatency, plan: (r: ActiveRequest[], nowMs: number, l: StagedLatency) => OnTimePlan): number {
  let active = initial.map((r) => ({ ...r }));
  let [now, onTime] = [0, 0];
  while (active.length > 0) {
    const next = plan(active, now, latency);
    const step = nextStep(next, active);
    if (!step) break;
    now += latency.latencyMs(step.stage, step.members.length);
    for (const m of step.members) active[m]!.stage += 1;
    const dropped = new Set(next.dropped);
    onTime += active.filter((r, i) => !dropped.has(i) && r.stage === latency.stages && now <= r.deadlineMs).length;
    active = active.filter((r, i) => !dropped.has(i) && r.stage < latency.stages);
  }
  return onTime;
}

function randomRequests(random: () => number, count: number, stages: number): ActiveRequest[] {
  return Array.from({ length: count }, () => ({ stage: Math.floor(random() * stages), deadlineMs: 1000 + Math.floor(random() * 100) }));
}

describe('on-time batching (edge scheduling §2)', () => {
  it('a segment runs its latest request alone until it catches up, then as one batch', () => {
    // Two requests: one waits before stage 2 of 4, the other before stage 0.
    // Stages 0 and 1 run one request, stages 2 and 3 run both: (2+1)·2 + (2+2)·2 = 14 ms.
    expect(catchUpMs([1, 0, 1, 0], staged(4))).toBe(14);
    // Together both end at 14 (Σ 28); the deeper one first ends at 6, the other at 6 + 12 (Σ 24).
    const requests = [{ stage: 2, deadlineMs: 100 }, { stage: 0, deadlineMs: 100 }];
    const plan = completionTimePlan(requests, 0, staged(4));
    expect(plan.segments).toEqual([{ members: [0], endMs: 6 }, { members: [1], endMs: 18 }]);
    expect(nextStep(plan, requests)).toEqual({ stage: 2, members: [0] });
    // One stage further on, catching up costs less than it saves: one segment, started by the later request.
    const closer = [{ stage: 1, deadlineMs: 100 }, { stage: 0, deadlineMs: 100 }];
    const merged = completionTimePlan(closer, 0, { stages: 4, maxBatch: Infinity, latencyMs: (_k, b) => 4 + b });
    expect(merged.segments).toEqual([{ members: [0, 1], endMs: 5 + 6 * 3 }]);
    expect(nextStep(merged, closer)).toEqual({ stage: 0, members: [1] });
  });

  it('the completion-time DP equals brute force over all FIFO segmentations (random instances, bounded and unbounded B)', () => {
    const random = seededRandom(7);
    for (let trial = 0; trial < 300; trial++) {
      const stages = 1 + Math.floor(random() * 5);
      const latency = staged(stages, trial % 2 === 0 ? Infinity : 1 + Math.floor(random() * 4));
      const requests = randomRequests(random, 1 + Math.floor(random() * 8), stages);
      const plan = completionTimePlan(requests, 0, latency, 'request');
      expect(planTotal(plan)).toBeCloseTo(bruteForceBest(requests, latency), 9);
      expect(plan.segments.flatMap((s) => s.members).sort((a, b) => a - b)).toEqual(requests.map((_, i) => i));
      // Units of a whole stage are one way to segment: never better than the best over single requests.
      expect(planTotal(completionTimePlan(requests, 0, latency, 'stage'))).toBeGreaterThanOrEqual(planTotal(plan) - 1e-9);
    }
  });

  it('a plan\'s segments end when their members, run stage by stage, do; no segment is larger than B', () => {
    const random = seededRandom(11);
    for (let trial = 0; trial < 100; trial++) {
      const latency = staged(5, 3);
      const requests = randomRequests(random, 12, 5);
      const plan = completionTimePlan(requests, 50, latency, 'stage');
      let clock = 50;
      for (const segment of plan.segments) {
        expect(segment.members.length).toBeLessThanOrEqual(3);
        clock += segmentMs(segment.members.map((i) => requests[i]!), latency);
        expect(segment.endMs).toBeCloseTo(clock, 9);
      }
    }
  });

  it('Our-Tardy drops what its plan would finish late and keeps the rest on time', () => {
    const random = seededRandom(3);
    for (let trial = 0; trial < 200; trial++) {
      const latency = staged(1 + Math.floor(random() * 5), 1 + Math.floor(random() * 8));
      const requests = Array.from({ length: 1 + Math.floor(random() * 20) }, () => ({ stage: 0, deadlineMs: 5 + random() * 60 }));
      const plan = tardyPlan(requests, 0, latency, trial % 2 === 0 ? 'request' : 'stage');
      const kept = plan.segments.flatMap((s) => s.members);
      expect([...kept, ...plan.dropped].sort((a, b) => a - b)).toEqual(requests.map((_, i) => i));
      for (const segment of plan.segments) for (const m of segment.members) expect(segment.endMs).toBeLessThanOrEqual(requests[m]!.deadlineMs);
    }
  });

  it('Our-Tardy gives up one request to batch the rest, where EDF serves the tight ones alone and runs out of time', () => {
    // One stage, h(b) = 2 + b, all waiting at 0. EDF runs the requests due at 3, 6 and 9 one by
    // one (each batch as large as the tightest deadline allows: one), and both due at 11 miss.
    // Our-Tardy drops the one due at 3, runs 6 and 9 together (4 ms), then both 11s (8 ms).
    const requests = [3, 6, 9, 11, 11].map((deadlineMs) => ({ stage: 0, deadlineMs }));
    expect(runToEnd(requests, staged(1), (r, now, l) => edfBatch(r, now, l))).toBe(3);
    expect(runToEnd(requests, staged(1), (r, now, l) => tardyPlan(r, now, l, 'request'))).toBe(4);
  });

  it('over stages, Our-Tardy lets shallow requests catch up with deeper ones that EDF runs ahead', () => {
    const requests = [
      { stage: 0, deadlineMs: 10 },
      { stage: 1, deadlineMs: 10 },
      { stage: 1, deadlineMs: 12 },
      { stage: 1, deadlineMs: 14 },
      { stage: 0, deadlineMs: 15 },
    ];
    expect(runToEnd(requests, staged(3), (r, now, l) => edfBatch(r, now, l))).toBe(1);
    expect(runToEnd(requests, staged(3), (r, now, l) => tardyPlan(r, now, l, 'request'))).toBe(3);
  });

  it('EDF drops a request that cannot make its deadline alone, and the expired', () => {
    const requests = [{ stage: 0, deadlineMs: 1 }, { stage: 0, deadlineMs: -1 }, { stage: 0, deadlineMs: 50 }];
    const plan = edfBatch(requests, 0, staged(2));
    expect(plan.dropped.sort()).toEqual([0, 1]);
    expect(plan.segments[0]!.members).toEqual([2]);
  });

  // About 2 ms on a quiet core; the bound leaves room for a machine busy with other tests, and
  // still catches a plan that grows faster than the DP's (a blow-up takes seconds).
  it('plans 500 requests over 5 stages in milliseconds (median of 25 under 20 ms)', () => {
    const random = seededRandom(5);
    const latency = staged(5, 90);
    const requests = randomRequests(random, 500, 5);
    const times = Array.from({ length: 25 }, () => {
      const start = performance.now();
      tardyPlan(requests, 0, latency, 'stage');
      completionTimePlan(requests, 0, latency, 'stage');
      return performance.now() - start;
    }).sort((a, b) => a - b);
    expect(times[12]).toBeLessThan(20);
  });
});

describe('on-time policies in the simulator (edge scheduling Fig. 8)', () => {
  it('at a rate batching-aware EDF cannot keep 90% on time, Our-Tardy does, and both batch far past No-Batch', () => {
    // VGG16-like profile in 5 stages, 150 ms deadline, Poisson: the capacities are EDF 130, Our-Tardy 160 req/s (docs/scheduler.md).
    expect(onTimeRatio('vgg16', 'edf', 150)).toBeLessThan(0.9);
    expect(onTimeRatio('vgg16', 'our-tardy', 150)).toBeGreaterThanOrEqual(0.9);
    expect(onTimeRatio('vgg16', 'no-batch', 150)).toBeLessThan(0.5);
  });

  it("stands in for the paper's LTE traces with a link that stays within 4-20 Mbps and holds each level for 500 ms", () => {
    const link = lteLikeLink(7);
    const levels = Array.from({ length: 2000 }, (_, i) => link(i * 50));
    expect(Math.min(...levels)).toBeGreaterThanOrEqual(4);
    expect(Math.max(...levels)).toBeLessThanOrEqual(20);
    // Ten readings per step: a level changes only every tenth reading, and by at most 3 Mbps.
    levels.forEach((mbps, i) => {
      if (i % 10 !== 0) expect(mbps).toBe(levels[i - 1]);
      else if (i > 0) expect(Math.abs(mbps - levels[i - 1]!)).toBeLessThanOrEqual(3);
    });
    expect(new Set(levels).size).toBeGreaterThan(100);
  });
});
