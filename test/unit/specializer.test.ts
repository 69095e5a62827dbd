import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime } from '../../analyzers/index.js';
import { behaviourByDominant, createSpecializer, measureBehaviour, trainingSet, type LabelledPool, type SpecializerOptions, type SpecializerTemplate } from '../../analyzers/specialize/index.js';
import { createHeadTrainer } from '../../analyzers/training/index.js';
import { seededRandom, silentLogger } from '../../core/index.js';
import { clusteredFeatures } from '../helpers.js';

const FEATURES = 32;
const CLASSES = Array.from({ length: 12 }, (_, i) => `c${i}`);

/** `perClass` rows of each class, the same centres in every pool. */
function pool(perClass: number, seed: number): LabelledPool {
  const rows = CLASSES.length * perClass;
  const { features, labels } = clusteredFeatures({ rows, featureCount: FEATURES, classes: CLASSES.length, classOf: (r) => Math.floor(r / perClass), seed, centreSeed: 99, centreScale: 3 });
  return { featureCount: FEATURES, features, labels: Array.from(labels, (c) => CLASSES[c]!) };
}

describe('training sets for h_D (thesis §5.2)', () => {
  it('takes the dominant classes evenly up to their share of maxRows, and "other" rows from the rest to make the skew', () => {
    const labels = [...Array(100).fill('a'), ...Array(100).fill('b'), ...Array(50).fill('c'), ...Array(50).fill('d')] as string[];
    const p: LabelledPool = { featureCount: 2, features: Float32Array.from({ length: 600 }, (_, i) => i), labels };
    const set = trainingSet(p, ['a', 'b'], { skew: 0.6, maxRows: 100, random: seededRandom(1) });
    expect(set.classes).toBe(3);
    const count = (c: number) => set.labels.filter((l) => l === c).length;
    // 30 rows of each dominant class (100 · 0.6 / 2), and 40 others: 60 / (60 + 40) = 0.6.
    expect([count(0), count(1), count(2)]).toEqual([30, 30, 40]);
    // Each row's features (here its index, twice over) came with its own label.
    set.labels.forEach((label, i) => {
      const row = set.features[i * 2]! / 2;
      expect(set.features[i * 2 + 1]).toBe(row * 2 + 1);
      expect(label).toBe({ a: 0, b: 1 }[labels[row]!] ?? 2);
    });
  });

  it("repeats a dominant class's rows up to its share, so a small pool's other classes all stand for \"other\"", () => {
    // A stream's pool: 10 rows of each of 10 classes, one of them dominant.
    const labels = Array.from({ length: 100 }, (_, i) => `c${i % 10}`);
    const set = trainingSet({ featureCount: 1, features: Float32Array.from({ length: 100 }, (_, i) => i), labels }, ['c1'], { skew: 0.6, maxRows: 600, random: seededRandom(1) });
    const dominant = [...set.labels.keys()].filter((i) => set.labels[i] === 0).map((i) => set.features[i]!);
    // 360 rows of c1 (600 · 0.6): its 10 rows, 36 times each; all 90 rows of the nine others.
    expect(dominant).toHaveLength(360);
    expect(new Set(dominant)).toEqual(new Set([1, 11, 21, 31, 41, 51, 61, 71, 81, 91]));
    for (const row of new Set(dominant)) expect(dominant.filter((r) => r === row)).toHaveLength(36);
    expect(set.labels.filter((l) => l === 1)).toHaveLength(90);
  });

  it('uses every "other" row there is when there are too few for the skew', () => {
    const labels = [...Array(100).fill('a'), ...Array(10).fill('z')] as string[];
    const set = trainingSet({ featureCount: 1, features: new Float32Array(110), labels }, ['a'], { skew: 0.5, maxRows: 1000, random: seededRandom(1) });
    expect(set.labels.filter((l) => l === 1)).toHaveLength(10);
  });
});

describe('a specializer: WEG over a real head trained on its thread and served by onnxruntime', () => {
  const trainer = createHeadTrainer();
  const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1 });
  const headDir = mkdtempSync(join(tmpdir(), 'panoptes-specializer-'));
  afterAll(async () => {
    await trainer.close();
    await runtime.close();
    rmSync(headDir, { recursive: true, force: true });
  });
  const [train, test] = [pool(40, 1), pool(20, 2)];
  /** Inputs are rows of the held-out pool: the template's features are the row's. */
  const rowFeatures = async (rows: readonly number[]) => test.features.slice(rows[0]! * FEATURES, (rows[0]! + 1) * FEATURES);
  /** A specializer over one template, trained on `train`, retraining waited for. */
  const specializerOn = (oracle: (rows: readonly number[]) => Promise<string[]>, template: Pick<SpecializerTemplate<number>, 'behaviour' | 'features'>, options: Partial<SpecializerOptions<number>> = {}) =>
    createSpecializer<number>({
      name: 'test',
      oracle,
      templates: [{ name: 'tiny', pool: train, ...template }],
      weg: { oracleAccuracy: 1, accuracyMargin: -0.05 },
      training: { skew: 0.6, maxRows: 300 },
      train: (job) => trainer.train(job),
      runtime,
      headDir,
      random: seededRandom(5),
      awaitTraining: true,
      ...options,
    });

  it("measures a template's a_in, e_in→out and a_out on held-out rows; separable classes give nearly perfect ones", async () => {
    const grid = await measureBehaviour(train, test, { dominantCounts: [2, 5, 30], setsPerCount: 3, skew: 0.6, maxRows: 300, random: seededRandom(3), train: (job) => trainer.train(job) });
    // n = 30 is more than the 12 classes: left out.
    expect(grid.map((g) => g.dominant)).toEqual([2, 5]);
    for (const g of grid) {
      expect(g.sets).toBe(3);
      expect(g.aIn).toBeGreaterThan(0.9);
      expect(g.aOut).toBeGreaterThan(0.9);
      expect(g.aIn + g.eInOut).toBeLessThanOrEqual(1 + 1e-9);
    }
  }, 120_000);

  it('specializes on a skewed stream, answers most inputs with the cascade, agrees with the oracle, and falls through on "other"', async () => {
    const grid = await measureBehaviour(train, test, { dominantCounts: [1, 2, 5], setsPerCount: 2, skew: 0.6, maxRows: 300, random: seededRandom(3), train: (job) => trainer.train(job) });
    // Inputs are rows of the held-out pool; the oracle knows their labels, the template their features.
    const oracleCalls: number[] = [];
    const specializer = specializerOn(
      async (rows) => {
        oracleCalls.push(...rows);
        return rows.map((r) => test.labels[r]!);
      },
      { behaviour: behaviourByDominant(grid), features: rowFeatures },
    );
    const random = seededRandom(11);
    const rowOf = (label: string) => CLASSES.indexOf(label) * 20 + Math.floor(random() * 20);
    const inputs = Array.from({ length: 400 }, () => rowOf(random() < 0.95 ? (random() < 0.5 ? 'c0' : 'c1') : CLASSES[2 + Math.floor(random() * 10)]!));
    const answered = { oracle: 0, cascade: 0, 'fall-through': 0 };
    let agree = 0;
    for (const [i, row] of inputs.entries()) {
      const result = await specializer.classify(row, i * 100);
      answered[result.answeredBy] += 1;
      if (result.label === test.labels[row]) agree += 1;
      expect(result.modelMs).toBeGreaterThanOrEqual(0);
    }
    const status = specializer.status();
    await specializer.close();
    expect(status.transitions).toBeGreaterThanOrEqual(1);
    expect(status.dominant.sort()).toEqual(['c0', 'c1']);
    expect(status.retrains).toBeGreaterThanOrEqual(1);
    expect(['wasm', 'cpu', 'tensorflow']).toContain(status.trainedOn);
    expect(answered.cascade).toBeGreaterThan(300);
    expect(answered['fall-through']).toBeGreaterThan(0);
    expect(agree / inputs.length).toBeGreaterThan(0.95);
    // The oracle ran on the window, on fall-throughs and on spot checks only.
    expect(oracleCalls.length).toBeLessThan(inputs.length - answered.cascade + 20);
  }, 120_000);

  it('weighing cost: keeps a cascade cheaper than its oracle, and leaves one that is not after w_min calls, for good', async () => {
    const grid = await measureBehaviour(train, test, { dominantCounts: [1, 2, 5], setsPerCount: 2, skew: 0.6, maxRows: 300, random: seededRandom(3), train: (job) => trainer.train(job) });
    const random = seededRandom(11);
    const rowOf = (label: string) => CLASSES.indexOf(label) * 20 + Math.floor(random() * 20);
    const inputs = Array.from({ length: 300 }, () => rowOf(random() < 0.5 ? 'c0' : 'c1'));
    const run = async (oracleMs: number) => {
      const oracle = async (rows: readonly number[]) => {
        if (oracleMs > 0) await sleep(oracleMs);
        return rows.map((r) => test.labels[r]!);
      };
      const specializer = specializerOn(oracle, { behaviour: behaviourByDominant(grid), features: rowFeatures }, { relativeCost: 'measured' });
      for (const [i, row] of inputs.entries()) await specializer.classify(row, i * 100);
      const status = specializer.status();
      await specializer.close();
      return status;
    };
    // An oracle of 10 ms against a head of well under a millisecond: specialized, and it stays.
    expect(await run(10)).toMatchObject({ phase: 'specialized', transitions: 1 });
    // An oracle that costs nothing: the cascade costs more whatever falls through. It is tried
    // once (its cost unknown until it runs), judged after w_min = 30 calls, and not chosen again.
    const free = await run(0);
    expect(free).toMatchObject({ phase: 'selecting', epoch: 2, transitions: 1 });
    expect(free.specialized).toBeGreaterThanOrEqual(30);
    expect(free.specialized).toBeLessThan(40);
  }, 120_000);

  it('classifies a group at once: when WEG leaves in the middle of it, the rest count and their oracle labels open the new window', async () => {
    // A template that answers its own classes perfectly and half of the rest: Eq. 5.1 passes only while 90% of the inputs are in D.
    const grid = [1, 2].map((dominant) => ({ dominant, aIn: 1, eInOut: 0, aOut: 0.5 }));
    const inFlight = { now: 0, most: 0 };
    const specializer = specializerOn(
      async (rows) => {
        inFlight.most = Math.max(inFlight.most, ++inFlight.now);
        await new Promise((resolve) => setTimeout(resolve, 1));
        inFlight.now -= 1;
        return rows.map((r) => test.labels[r]!);
      },
      { behaviour: behaviourByDominant(grid), features: rowFeatures },
    );
    const random = seededRandom(12);
    const rowOf = (label: string) => CLASSES.indexOf(label) * 20 + Math.floor(random() * 20);
    let t = 0;
    // Specialized on c0 and c1, input by input.
    while (specializer.status().phase !== 'specialized' && t < 200) await specializer.classify(rowOf(random() < 0.5 ? 'c0' : 'c1'), t++ * 100);
    expect(specializer.status().phase).toBe('specialized');
    const before = specializer.status();
    // Then 60 inputs of other classes at once: h_D passes them on, and WEG leaves early in the group.
    const group = Array.from({ length: 60 }, () => ({ input: rowOf(CLASSES[2 + Math.floor(random() * 10)]!), timeMs: t++ * 100 }));
    const results = await specializer.classifyAll(group);
    const after = specializer.status();
    await specializer.close();
    expect(results.every((r) => r.status === 'fulfilled')).toBe(true);
    const answers = results.map((r) => (r.status === 'fulfilled' ? r.value : undefined)!);
    // Every one ran the cascade (decided at the group's start), at once.
    expect(answers.every((a) => a.answeredBy !== 'oracle')).toBe(true);
    expect(inFlight.most).toBeGreaterThan(10);
    expect(after.specialized - before.specialized).toBe(60);
    expect(after.fellThrough - before.fellThrough).toBe(answers.filter((a) => a.answeredBy === 'fall-through').length);
    // The labels of the fall-throughs after the exit filled the new window (w_min 30): WEG is past it.
    expect(after.epoch).toBe(before.epoch + 1);
    expect(after.phase).not.toBe('window');
    await expect(specializer.classifyAll([])).resolves.toEqual([]);
  }, 120_000);

  it("refuses a second call while one runs: a stream's inputs go one call at a time", async () => {
    const specializer = specializerOn(
      async (rows) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return rows.map(() => 'c0');
      },
      { behaviour: () => undefined, features: rowFeatures },
    );
    const first = specializer.classifyAll([{ input: 1, timeMs: 0 }]);
    await expect(specializer.classifyAll([{ input: 2, timeMs: 100 }])).rejects.toThrow(/one call at a time/);
    expect((await first)[0]).toMatchObject({ status: 'fulfilled', value: { label: 'c0', answeredBy: 'oracle' } });
    await specializer.close();
  });

  it('BAD TRAINING: a retraining that fails leaves the oracle serving, says why in status(), and WEG tries again after w_min inputs, then after 2·w_min', async () => {
    const grid = [{ dominant: 1, aIn: 1, eInOut: 0, aOut: 1 }];
    let attempts = 0;
    const specializer = specializerOn(async (rows) => rows.map(() => 'c0'), { behaviour: behaviourByDominant(grid), features: async () => new Float32Array(FEATURES) }, {
      train: async () => {
        attempts += 1;
        throw new Error('out of memory in the training thread');
      },
    });
    const attemptsAt: number[] = [];
    for (let i = 0; i < 130; i++) {
      const before = attempts;
      expect((await specializer.classify(i, i * 100)).answeredBy).toBe('oracle');
      if (attempts > before) attemptsAt.push(i);
    }
    const status = specializer.status();
    await specializer.close();
    expect(status.trainingError).toContain('out of memory in the training thread');
    expect(status.transitions).toBe(0);
    expect(status.retrains).toBe(0);
    // After w_min = 30 labels; then 30 inputs after the failure showed (on the next input), then 60.
    expect(attemptsAt).toEqual([29, 60, 121]);
  }, 60_000);
});
