import { describe, expect, it } from 'vitest';
import { createCachedModel, LOOKUP_HIT, LOOKUP_PROBABILITIES, type SegmentedModel } from '../../analyzers/cache/index.js';
import { Leases } from '../../analyzers/cache/leases.js';
import type { LoadedModel, NamedTensors, TensorData } from '../../analyzers/index.js';

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** A lookup model whose runs wait for `until`, answering a miss; it counts its disposals. */
function lookupModel(name: string, until: Promise<void>): LoadedModel & { disposed: number } {
  return {
    name,
    inputNames: ['hidden'],
    outputNames: [LOOKUP_PROBABILITIES, LOOKUP_HIT],
    disposed: 0,
    async run() {
      await until;
      return { [LOOKUP_PROBABILITIES]: { type: 'float32', data: new Float32Array([1, 0]), dims: [1, 2] }, [LOOKUP_HIT]: { type: 'float32', data: new Float32Array([0]), dims: [1] } };
    },
    async dispose() {
      this.disposed += 1;
    },
  };
}

const tensor = (): TensorData => ({ type: 'float32', data: new Float32Array([1, 2]), dims: [1, 2] });

/** Two segments, cut at `hidden`; the last answers class 0. */
const base: SegmentedModel = {
  name: 'base',
  layers: ['hidden'],
  segments: 2,
  runSegment: async (k): Promise<NamedTensors> => (k === 0 ? { hidden: tensor() } : { logits: tensor() }),
  timeSegment: async () => 1,
  runRange: async (from): Promise<NamedTensors> => (from === 0 ? { hidden: tensor() } : { logits: tensor() }),
  prepareRange: async () => undefined,
  runAll: async () => ({ outputs: { logits: tensor() }, hidden: [tensor()] }),
  dispose: async () => undefined,
};

describe('leases on lookup models swapped out', () => {
  it('disposes a retired model once its last lookup ends, and at once when none runs', async () => {
    const leases = new Leases<{ dispose(): Promise<void>; disposed: number }>();
    const model = { disposed: 0, async dispose() { this.disposed += 1; } };
    const [first, second] = [leases.acquire(model), leases.acquire(model)];
    await leases.retire(model);
    expect(model.disposed).toBe(0);
    await first();
    await first(); // a second release of the same lease changes nothing
    expect(model.disposed).toBe(0);
    await second();
    expect(model.disposed).toBe(1);
    const idle = { disposed: 0, async dispose() { this.disposed += 1; } };
    await leases.retire(idle);
    expect(idle.disposed).toBe(1);
  });

  it('FORCED RACE: a lookup still running across two retrainings keeps its model until it ends', async () => {
    const stuck = gate();
    const v1 = lookupModel('v1', stuck.opened);
    const model = createCachedModel({ base, caches: [{ layer: 0, variant: 'FC', model: v1, baseClassOf: [0, -1] }], answerOf: () => 0 });
    // The request is answered by the base while its lookup on v1 waits (a lookup queued behind a long batch).
    const answered = await model.run({ input: tensor() });
    expect(answered.exit).toBe('full');
    // Two retrainings swap v2 in, then v3; v1 and v2 are retired as they go.
    const v2 = lookupModel('v2', Promise.resolve());
    model.swap([{ layer: 0, variant: 'FC', model: v2, baseClassOf: [0, -1] }]);
    await model.retire(v1);
    model.swap([{ layer: 0, variant: 'FC', model: lookupModel('v3', Promise.resolve()), baseClassOf: [0, -1] }]);
    await model.retire(v2);
    expect(v2.disposed).toBe(1);
    // Disposing v1 "one retraining later" would have freed it under the running lookup.
    expect(v1.disposed).toBe(0);
    stuck.open();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(v1.disposed).toBe(1);
  });
});
