import { afterAll, describe, expect, it } from 'vitest';
import { createStreamPool } from '../../analyzers/specialize/index.js';
import { createHeadTrainer } from '../../analyzers/training/index.js';
import { seededRandom } from '../../core/index.js';
import { clusteredFeatures } from '../helpers.js';

const FEATURES = 16;
const training = { skew: 0.6, maxRows: 200 };

describe("a stream's own labelled pool", () => {
  const trainer = createHeadTrainer();
  afterAll(() => trainer.close());

  it('keeps at most rowsPerClass inputs of a class, a uniform sample of those seen', () => {
    // Of 100 inputs of one class, 10 stay: over many streams each input stays about as often as any other.
    const kept = new Array<number>(100).fill(0);
    const random = seededRandom(5);
    for (let trial = 0; trial < 400; trial++) {
      const pool = createStreamPool({ rowsPerClass: 10, training, random });
      const holder: number[] = [];
      for (let input = 0; input < 100; input++) {
        const slot = pool.admit('car');
        if (!slot) continue;
        pool.fill(slot, Float32Array.of(input));
        holder[slot.slot] = input;
      }
      expect(pool.pool.labels).toHaveLength(10);
      expect([...pool.pool.features].sort((a, b) => a - b)).toEqual([...holder].sort((a, b) => a - b));
      for (const input of holder) kept[input]! += 1;
    }
    // Each input's chance is 10/100: 40 of 400 trials. The first ten and the last ten alike.
    const first = kept.slice(0, 10).reduce((a, b) => a + b) / 10;
    const last = kept.slice(90).reduce((a, b) => a + b) / 10;
    expect(first).toBeGreaterThan(30);
    expect(first).toBeLessThan(50);
    expect(last).toBeGreaterThan(30);
    expect(last).toBeLessThan(50);
  });

  it('refuses features of another width', () => {
    const pool = createStreamPool({ rowsPerClass: 4, training, random: seededRandom(1) });
    pool.fill(pool.admit('a')!, new Float32Array(FEATURES));
    expect(() => pool.fill(pool.admit('a')!, new Float32Array(FEATURES + 1))).toThrow(/17 features for class a; the pool's rows have 16/);
  });

  it('keeps maxClasses classes, those seen most recently: a new class lets the one seen longest ago go', () => {
    const pool = createStreamPool({ rowsPerClass: 2, maxClasses: 3, training, random: seededRandom(1) });
    const add = (label: string): void => {
      const slot = pool.admit(label);
      if (slot) pool.fill(slot, new Float32Array(FEATURES));
    };
    for (const label of ['a', 'b', 'c', 'a', 'd']) add(label);
    // b was seen longest ago when d came (a was seen again after c).
    expect([...new Set(pool.pool.labels)].sort()).toEqual(['a', 'c', 'd']);
    expect(pool.pool.labels).toHaveLength(2 + 1 + 1);
    // An input of a class let go while its features were computed joins nothing, even where the
    // class has been admitted again since.
    const slot = pool.admit('e')!;
    for (const label of ['f', 'g', 'h']) add(label);
    pool.fill(slot, new Float32Array(FEATURES));
    expect([...new Set(pool.pool.labels)].sort()).toEqual(['f', 'g', 'h']);
    const stale = pool.admit('i')!;
    for (const label of ['j', 'k', 'l', 'i']) add(label);
    pool.fill(stale, Float32Array.of(...Array<number>(FEATURES).fill(7)));
    expect(pool.pool.labels.filter((l) => l === 'i')).toHaveLength(1);
    expect(pool.pool.features.includes(7)).toBe(false);
  });

  it('measures again once half the classes measured have been let go (a stream of many classes)', async () => {
    const classes = 5;
    const { features, labels } = clusteredFeatures({ rows: 500, featureCount: FEATURES, classes, classOf: (r) => r % classes, seed: 2, centreSeed: 3, centreScale: 3 });
    const pool = createStreamPool({ rowsPerClass: 10, maxClasses: 3, minRows: 5, training, random: seededRandom(4) });
    const addClass = async (c: number): Promise<void> => {
      for (let row = 0; row < 500; row++) {
        if (labels[row] !== c) continue;
        const slot = pool.admit(`c${c}`);
        if (slot) pool.fill(slot, features.subarray(row * FEATURES, (row + 1) * FEATURES));
        await pool.measureIfDue((job) => trainer.train(job));
      }
    };
    for (const c of [0, 1, 2]) await addClass(c);
    const before = pool.measured;
    expect(before.length).toBeGreaterThan(0);
    // c3 lets c0 go: one of three is not half.
    await addClass(3);
    expect(pool.measured).toBe(before);
    // c4 lets c1 go: two of three are.
    await addClass(4);
    expect(pool.measured).not.toBe(before);
    expect([...new Set(pool.pool.labels)].sort()).toEqual(['c2', 'c3', 'c4']);
  }, 60_000);

  it("measures the template's behaviour once two classes have rows enough, and again when their number has grown by half", async () => {
    const classes = 6;
    const { features, labels } = clusteredFeatures({ rows: 600, featureCount: FEATURES, classes, classOf: (r) => r % classes, seed: 2, centreSeed: 3, centreScale: 3 });
    const pool = createStreamPool({ rowsPerClass: 20, minRows: 5, training, random: seededRandom(4) });
    // Unmeasured, a template is never chosen: WEG explores.
    expect(pool.behaviour(2)).toBeUndefined();
    const add = async (row: number): Promise<void> => {
      const label = `c${labels[row]}`;
      const slot = pool.admit(label);
      if (slot) pool.fill(slot, features.subarray(row * FEATURES, (row + 1) * FEATURES));
      await pool.measureIfDue((job) => trainer.train(job));
    };
    // Classes c0 and c1 only: 10 rows each (5 in each half) make them eligible.
    for (let row = 0; row < 600 && pool.measured.length === 0; row++) if (labels[row]! < 2) await add(row);
    expect(pool.measured.map((m) => m.dominant)).toEqual([1]);
    expect(pool.measured[0]!.aIn).toBeGreaterThan(0.9);
    // A third class is half again as many: measured again, now at n = 1 and 2.
    for (let row = 0; row < 600; row++) if (labels[row] === 2) await add(row);
    const second = pool.measured;
    expect(second.map((m) => m.dominant)).toEqual([1, 2]);
    for (const m of second) expect(m.aIn).toBeGreaterThan(0.9);
    expect(pool.behaviour(2)?.aIn).toBe(second[1]!.aIn);
    // A fourth is not (4 < 4.5): the measurement stays.
    for (let row = 0; row < 600; row++) if (labels[row] === 3) await add(row);
    expect(pool.measured).toBe(second);
    // c0 and c1 stopped at the 10 rows that made them eligible; c2 and c3 kept 20 of their 100.
    expect(pool.pool.labels).toHaveLength(10 + 10 + 20 + 20);
  }, 60_000);
});
