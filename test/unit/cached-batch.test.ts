import { describe, expect, it } from 'vitest';
import { createCachedModel, LOOKUP_HIT, LOOKUP_PROBABILITIES, type SegmentedModel } from '../../analyzers/cache/index.js';
import type { LoadedModel, NamedTensors, TensorData } from '../../analyzers/index.js';

/**
 * A batch through a cached model, step by step: a base of three segments and a lookup on the
 * first cut, each waiting on a gate the test opens. Each row's value is its request's number; the
 * lookup hits the even ones.
 */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));
const rowsOf = (t: TensorData): number[] => [...(t.data as Float32Array)];

function setUp(mode: 'sync' | 'async') {
  const events: string[] = [];
  const segments = [gate(), gate(), gate()];
  const lookup = gate();
  const base: SegmentedModel = {
    name: 'base',
    layers: ['h0', 'h1'],
    segments: 3,
    async runSegment(k, input): Promise<NamedTensors> {
      const t = 'dims' in input ? (input as TensorData) : (input as NamedTensors).x!;
      events.push(`segment ${k}: ${rowsOf(t).join(',')}`);
      await segments[k]!.opened;
      events.push(`segment ${k} done`);
      return k < 2 ? { [`h${k}`]: t } : { probabilities: { type: 'float32', data: new Float32Array(t.dims[0]!), dims: [t.dims[0]!, 1] } };
    },
    timeSegment: async () => 1,
    async runRange(from, to, input) {
      if (from < to) events.push(`range ${from}-${to}`);
      let outputs = await this.runSegment(from, input);
      for (let k = from + 1; k <= to; k++) outputs = await this.runSegment(k, outputs[`h${k - 1}`]!);
      return outputs;
    },
    runAll: async () => {
      throw new Error('not used');
    },
    prepareRange: async () => undefined,
    dispose: async () => undefined,
  };
  const model: LoadedModel = {
    name: 'lookup',
    inputNames: ['hidden'],
    outputNames: [LOOKUP_PROBABILITIES, LOOKUP_HIT],
    async run(feeds) {
      const rows = rowsOf(feeds.hidden!);
      events.push(`lookup: ${rows.join(',')}`);
      await lookup.opened;
      events.push('lookup done');
      return {
        [LOOKUP_PROBABILITIES]: { type: 'float32', data: new Float32Array(rows.flatMap(() => [1, 0])), dims: [rows.length, 2] },
        [LOOKUP_HIT]: { type: 'float32', data: new Float32Array(rows.map((r) => (r % 2 === 0 ? 1 : 0))), dims: [rows.length, 1] },
      };
    },
    dispose: async () => undefined,
  };
  const cached = createCachedModel({ base, caches: [{ layer: 0, variant: 'Pool(1)', model, baseClassOf: [5, -1] }], mode, answerOf: () => 0 });
  const run = (requests: number[]) => cached.runBatch({ x: { type: 'float32', data: new Float32Array(requests), dims: [requests.length, 1] } });
  return { events, segments, lookup, run };
}

describe('a batch through a cached model', () => {
  it('async: the base goes on while the lookup runs; its hits leave the batch at the next segment', async () => {
    const { events, segments, lookup, run } = setUp('async');
    segments[0]!.open();
    const batch = run([0, 1, 2, 3]);
    await tick();
    expect(events).toEqual(['segment 0: 0,1,2,3', 'segment 0 done', 'lookup: 0,1,2,3', 'segment 1: 0,1,2,3']);
    lookup.open();
    await tick();
    segments[1]!.open();
    segments[2]!.open();
    const { answers, doneMs } = await batch;
    expect(events.slice(4)).toEqual(['lookup done', 'segment 1 done', 'segment 2: 1,3', 'segment 2 done']);
    expect(answers.map((a) => [a.answer, a.exit])).toEqual([[5, 0], [0, 'full'], [5, 0], [0, 'full']]);
    expect(Math.max(doneMs[0]!, doneMs[2]!)).toBeLessThan(Math.min(doneMs[1]!, doneMs[3]!));
  });

  it('async: a batch its lookup answers whole ends at once, the segment running left to finish', async () => {
    const { events, segments, lookup, run } = setUp('async');
    segments[0]!.open();
    const batch = run([0, 2]);
    await tick();
    lookup.open();
    const { answers } = await batch;
    expect(answers.map((a) => a.exit)).toEqual([0, 0]);
    expect(events).not.toContain('segment 1 done');
    segments[1]!.open();
  });

  it('async: a lookup still running when the base ends is left, and the base answers', async () => {
    const { events, segments, lookup, run } = setUp('async');
    for (const s of segments) s.open();
    const { answers } = await run([0, 1, 2]);
    expect(answers.map((a) => a.exit)).toEqual(['full', 'full', 'full']);
    expect(events).not.toContain('lookup done');
    lookup.open();
  });

  it('sync: the base waits for the lookup, and its hits never reach the next segment', async () => {
    const { events, segments, lookup, run } = setUp('sync');
    for (const s of segments) s.open();
    const batch = run([0, 1, 2, 3]);
    await tick();
    expect(events).toEqual(['segment 0: 0,1,2,3', 'segment 0 done', 'lookup: 0,1,2,3']);
    lookup.open();
    const { answers } = await batch;
    // No lookup under way after it: the base runs to its end in one run, with no cut between.
    expect(events.slice(3)).toEqual(['lookup done', 'range 1-2', 'segment 1: 1,3', 'segment 1 done', 'segment 2: 1,3', 'segment 2 done']);
    expect(answers.map((a) => a.exit)).toEqual([0, 'full', 0, 'full']);
  });

  it('async: a batch of one runs on to its end in one run while its lookup runs: nothing could leave the batch at a cut', async () => {
    const { events, segments, lookup, run } = setUp('async');
    for (const s of segments) s.open();
    const { answers } = await run([1]);
    expect(events.slice(0, 4)).toEqual(['segment 0: 1', 'segment 0 done', 'lookup: 1', 'range 1-2']);
    expect(answers.map((a) => a.exit)).toEqual(['full']);
    lookup.open();
  });
});
