import { describe, expect, it } from 'vitest';
import { SessionQueue } from '../../analyzers/backend/session-queue.js';

const latency = (b: number): number => 10 + 5 * b; // ℓ(b) = αb + β with α = 5 ms, β = 10 ms

function queueOf(deadlines: number[]): SessionQueue<string> {
  const queue = new SessionQueue<string>();
  deadlines.forEach((deadlineMs, i) => queue.push({ deadlineMs, item: `r${i}` }));
  return queue;
}

const items = (rs: { item: string }[]): string[] => rs.map((r) => r.item);

describe('SessionQueue', () => {
  it('keeps requests in deadline order, equal deadlines in arrival order', () => {
    const queue = queueOf([30, 10, 20, 10]);
    expect(items(queue.takeAll())).toEqual(['r1', 'r3', 'r2', 'r0']);
  });

  it('puts requests taken out unrun back where they were, ahead of later arrivals with the same deadline', () => {
    const queue = queueOf([Infinity, Infinity, Infinity, Infinity]);
    const taken = queue.takeFirst(2);
    queue.push({ deadlineMs: Infinity, item: 'late' });
    queue.push({ deadlineMs: 50, item: 'live' });
    queue.putBack(taken);
    expect(items(queue.takeAll())).toEqual(['live', 'r0', 'r1', 'r2', 'r3', 'late']);
  });

  it('early drop: the first window of B whose head can finish the whole window is the batch; what is before it is dropped', () => {
    // ℓ(3) = 25: the heads due at 10 and 20 cannot finish a batch of 3; the one due at 100 can.
    const queue = queueOf([10, 20, 100, 100, 100, 100]);
    const { batch, dropped } = queue.take('early', 0, 3, latency);
    expect(items(dropped)).toEqual(['r0', 'r1']);
    expect(items(batch)).toEqual(['r2', 'r3', 'r4']);
    expect(queue.length).toBe(1);
  });

  it('early drop: a short tail window is judged at its own size', () => {
    // At i = 1 the window is [r1] alone: ℓ(1) = 15 ≤ 18.
    const { batch, dropped } = queueOf([12, 18]).take('early', 0, 4, latency);
    expect(items(dropped)).toEqual(['r0']);
    expect(items(batch)).toEqual(['r1']);
  });

  it('early drop: drops everything when no window can make it, and takes nothing from an empty queue', () => {
    const queue = queueOf([5, 8]);
    expect(queue.take('early', 0, 2, latency)).toMatchObject({ batch: [], dropped: [{ item: 'r0' }, { item: 'r1' }] });
    expect(queue.take('early', 0, 2, latency)).toEqual({ batch: [], dropped: [] });
  });

  it('lazy drop: drops only what cannot finish even alone, and sizes the batch by the oldest deadline', () => {
    // ℓ(1) = 15: due at 10 is hopeless; due at 20 fits alone, and ℓ(2) = 20 ≤ 20 takes one more.
    const queue = queueOf([-1, 10, 20, 100, 100]);
    const first = queue.take('lazy', 0, 4, latency);
    expect(items(first.dropped)).toEqual(['r0', 'r1']);
    expect(items(first.batch)).toEqual(['r2', 'r3']);
    expect(items(queue.take('lazy', 0, 4, latency).batch)).toEqual(['r4']);
  });

  it('on time (Our-Tardy): drops the request whose batch would make the others late, and batches the rest', () => {
    // ℓ(b) = 2 + b. Serving the one due at 3 alone (3 ms) leaves 6, 9, 11, 11 to end at 9 at best:
    // late. Without it, one batch of four ends at 6 and every deadline holds.
    const queue = queueOf([3, 6, 9, 11, 11]);
    const { batch, dropped } = queue.take('tardy', 0, 4, (b) => 2 + b);
    expect(items(dropped)).toEqual(['r0']);
    expect(items(batch)).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(queue.length).toBe(0);
  });

  it('on time (Our-Tardy): never a batch above the target; what it keeps stays queued in deadline order', () => {
    const queue = queueOf([100, 50, 80, 60, 90, 70]);
    const { batch, dropped } = queue.take('tardy', 0, 2, latency);
    expect(dropped).toEqual([]);
    expect(items(batch)).toEqual(['r1', 'r3']);
    expect(items(queue.takeAll())).toEqual(['r5', 'r2', 'r4', 'r0']);
  });

  it('delay-tolerant requests never size a real-time window; they fill its spare slots only as far as its deadline and plan-ahead allow', () => {
    // Early drop at a target of 4: the live request due at 20 fits alone (ℓ(1) = 15), not beside three replay frames (ℓ(4) = 30).
    const queue = queueOf([20, Infinity, Infinity, Infinity]);
    const { batch, dropped } = queue.take('early', 0, 4, latency);
    expect(dropped).toEqual([]);
    expect(items(batch)).toEqual(['r0']);
    expect(items(queue.take('tardy', 0, 4, latency).batch)).toEqual([]);
    expect(items(queue.takeFirst(1))).toEqual(['r1']);
    // Allowed to fill: one replay frame joins the next live request (ℓ(2) = 20 ≤ its 20), not two.
    queue.push({ deadlineMs: 20, item: 'live' });
    expect(items(queue.take('early', 0, 4, latency, Infinity).batch)).toEqual(['live', 'r2']);
    // Plan-ahead wants the device back by 18: no room for one.
    queue.push({ deadlineMs: 20, item: 'live-2' });
    expect(items(queue.take('tardy', 0, 4, latency, 18).batch)).toEqual(['live-2']);
    expect(items(queue.takeAll())).toEqual(['r3']);
  });
});
