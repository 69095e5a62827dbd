import { describe, expect, it } from 'vitest';
import {
  behaviourByDominant,
  cascadeAccuracy,
  createWeg,
  dominantClasses,
  minimumSupport,
  simulateWeg,
  windowDetection,
  type Template,
  type TraceSegment,
  type Weg,
} from '../../analyzers/specialize/index.js';
import { TASKS, wegTable52 } from '../../scheduler/simulator/experiment-weg.js';

describe('WEG estimates (thesis appendix C, Eq. 5.1)', () => {
  it.each([
    // #, N, a*, n, p, w, k → p_in, p_out as Table C.1 prints them
    [2, 1000, 0.68, 10, 0.9, 30, 2, '0.558', '6.53e-5'],
    [3, 1000, 0.68, 10, 0.9, 60, 2, '0.891', '2.64e-4'],
    [4, 1000, 0.68, 10, 0.7, 60, 2, '0.789', '4.80e-4'],
    [5, 1000, 0.68, 10, 0.7, 90, 2, '0.933', '1.08e-3'],
    [6, 205, 0.58, 10, 0.9, 90, 2, '0.959', '1.94e-2'],
  ])('Table C.1 row %i: p_in and p_out from Eqs. C.1 and C.2 and the binomial, to three figures', (_, N, a, n, p, w, k, pIn, pOut) => {
    const got = windowDetection({ classes: N, oracleAccuracy: a, dominant: n, skew: p }, w, k);
    expect(got.pIn.toPrecision(3)).toBe(pIn);
    expect(got.pOut.toExponential(2)).toBe(pOut);
  });

  it('Table C.1 row 7 within one unit of its third figure (0.8708 and 1.317e-3 computed, 0.872 and 1.31e-3 printed)', () => {
    const got = windowDetection({ classes: 205, oracleAccuracy: 0.58, dominant: 10, skew: 0.9 }, 90, 3);
    expect(Math.abs(got.pIn - 0.872)).toBeLessThanOrEqual(0.0015);
    expect(Math.abs(got.pOut - 1.31e-3)).toBeLessThanOrEqual(0.0115e-3);
    // A larger k keeps a non-dominant class out of a 90-label window (row 6 against row 7).
    expect(got.pOut).toBeLessThan(windowDetection({ classes: 205, oracleAccuracy: 0.58, dominant: 10, skew: 0.9 }, 90, 2).pOut / 10);
  });

  it('Eq. 5.1 on hand-computed cases', () => {
    // 0.8·0.9 + 0.8·0.05·0.7 + 0.2·0.8·0.7 = 0.72 + 0.028 + 0.112
    expect(cascadeAccuracy({ aIn: 0.9, eInOut: 0.05, aOut: 0.8 }, 0.8, 0.7)).toBeCloseTo(0.86, 12);
    // All dominant, all answered right: a_in. No skew, every input passed on: the oracle's accuracy.
    expect(cascadeAccuracy({ aIn: 0.97, eInOut: 0, aOut: 1 }, 1, 0.7)).toBeCloseTo(0.97, 12);
    expect(cascadeAccuracy({ aIn: 0.97, eInOut: 0, aOut: 1 }, 0, 0.7)).toBeCloseTo(0.7, 12);
    // Non-dominant inputs mistaken for a dominant class are lost: 0.5·0.9 + 0.5·0.6·0.8.
    expect(cascadeAccuracy({ aIn: 0.9, eInOut: 0, aOut: 0.6 }, 0.5, 0.8)).toBeCloseTo(0.69, 12);
  });

  it("interpolates a template's behaviour between the n it was measured at, and holds it beyond", () => {
    const at = behaviourByDominant([
      { dominant: 10, aIn: 0.8, eInOut: 0.1, aOut: 0.7 },
      { dominant: 5, aIn: 0.9, eInOut: 0.05, aOut: 0.8 },
    ]);
    expect(at(7.5)).toEqual({ aIn: expect.closeTo(0.85, 12), eInOut: expect.closeTo(0.075, 12), aOut: expect.closeTo(0.75, 12) });
    expect(at(2)).toMatchObject({ aIn: 0.9 });
    expect(at(20)).toMatchObject({ aIn: 0.8 });
  });

  it('DOMCLASSES: classes seen at least k times; k = 2 below a 90-label window, 3 from 90', () => {
    expect(dominantClasses(['a', 'b', 'a', 'c', 'b', 'a'], 2)).toEqual(new Set(['a', 'b']));
    expect(dominantClasses(['a', 'b', 'a', 'c', 'b', 'a'], 3)).toEqual(new Set(['a']));
    expect([30, 89, 90, 120].map(minimumSupport)).toEqual([2, 2, 3, 3]);
  });
});

describe('WEG phases (Algorithm 5.1) on scripted labels', () => {
  // a* = 0.7, τ_a = +0.05: the cascade must be estimated at 0.75. At any n this template gives
  // 0.971 on dominant inputs and 0.63 on others, so it passes while p* ≥ 0.352.
  const template: Template = { name: 'compact', behaviour: () => ({ aIn: 0.95, eInOut: 0.03, aOut: 0.9 }) };
  const weg = (random: () => number = () => 1, params = {}): Weg<string> => createWeg<string>({ oracleAccuracy: 0.7, accuracyMargin: 0.05, ...params }, [template], random);
  /** Runs the oracle on each label, as WEG asks; returns the training request, if one came. */
  const explore = (w: Weg<string>, labels: readonly string[]) => {
    let request;
    for (const label of labels) {
      expect(w.next()).toEqual({ run: 'oracle' });
      request = w.explored(label) ?? request;
    }
    return request;
  };
  const skewed = (n: number, classes = ['a', 'b', 'c']) => Array.from({ length: n }, (_, i) => classes[i % classes.length]!);
  const specialize = (w: Weg<string>, labels = skewed(30)) => {
    const request = explore(w, labels)!;
    w.trained(request.template, request.dominant);
    return request;
  };

  it('enters: w_min oracle labels, D from those seen twice, the template trained, then the cascade', () => {
    const w = weg();
    expect(explore(w, skewed(29))).toBeUndefined();
    expect(w.status().phase).toBe('window');
    const request = explore(w, ['a']);
    expect(request).toEqual({ template, dominant: ['a', 'b', 'c'] });
    // The oracle keeps serving while h_D trains.
    expect(w.status().phase).toBe('training');
    expect(w.next()).toEqual({ run: 'oracle' });
    w.explored('a');
    w.trained(request!.template, request!.dominant);
    expect(w.status()).toMatchObject({ phase: 'specialized', window: 30, dominant: ['a', 'b', 'c'], transitions: 1 });
    expect(w.next()).toEqual({ run: 'cascade', spotCheck: false });
  });

  it('stays specialized while the spot checks agree and the skew holds; spot-checks only what h_D answered, with probability ε', () => {
    const draws = [0.5, 0.005, 0.5, 0.5];
    const w = weg(() => draws.shift() ?? 0.5);
    specialize(w);
    const actions = Array.from({ length: 4 }, () => w.next());
    expect(actions.map((a) => a.run === 'cascade' && a.spotCheck)).toEqual([false, true, false, false]);
    expect(w.exploited({ answeredItself: true, answer: 'a' })).toBeUndefined();
    expect(w.exploited({ answeredItself: true, answer: 'b', oracleLabel: 'b' })).toBeUndefined();
    // A fall-through the oracle labels in D (e_in→out) counts as in D.
    expect(w.exploited({ answeredItself: false, answer: 'c' })).toBeUndefined();
    expect(w.status()).toMatchObject({ phase: 'specialized', specialized: 4, fellThrough: 1 });
  });

  it('exits on τ_FP: the spot checks disagree more than half the time (n*/(n_c·ε) > 0.5)', () => {
    const w = weg(() => 0);
    specialize(w);
    for (let i = 0; i < 300; i++) expect(w.exploited({ answeredItself: true, answer: 'a' })).toBeUndefined();
    // One disagreement in 301 answers at ε = 0.01: 1/3.01 = 0.33, it stays; a second makes 0.66.
    expect(w.exploited({ answeredItself: true, answer: 'a', oracleLabel: 'x' })).toBeUndefined();
    expect(w.exploited({ answeredItself: true, answer: 'a', oracleLabel: 'y' })).toBe('exit');
    expect(w.status()).toMatchObject({ phase: 'window', epoch: 2 });
    expect(w.next()).toEqual({ run: 'oracle' });
  });

  it('exits on the accuracy estimate: inputs falling through to the oracle show a skew below what the threshold needs', () => {
    const w = weg(() => 1);
    specialize(w);
    // p* over the last w = 30 inputs: each fall-through the oracle labels outside D pushes one dominant window label out.
    let calls = 0;
    let exit;
    while (exit === undefined && calls < 30) {
      calls += 1;
      exit = w.exploited({ answeredItself: false, answer: `new-${calls}` });
    }
    // p* = (30 − m)/30 < 0.352 once m ≥ 20.
    expect(calls).toBe(20);
    expect(w.status()).toMatchObject({ phase: 'window', epoch: 2 });
    expect(w.status().estimate).toBeLessThan(0.75);
  });

  describe('weighing cost, where the template\'s is known (a choice: the thesis judges accuracy only)', () => {
    // A template at 0.4 of the oracle's cost that passes a quarter of D's inputs and 90% of the
    // others to the oracle: the cascade costs 0.4 + 0.25·p + 0.9·(1 − p), less than the oracle alone while p > 0.4615.
    const behaviour = { aIn: 0.74, eInOut: 0.25, aOut: 0.9 };
    const costly = (relativeCost?: number): Weg<string> =>
      createWeg<string>({ oracleAccuracy: 1, accuracyMargin: -0.2, relativeCost: () => relativeCost }, [{ name: 'compact', behaviour: () => behaviour }], () => 1);
    // Eight classes seen twice among 14 seen once, as uniform input over a few dozen classes shows:
    // 16 of 30 labels in D, but none of its classes would be dominant without each of its
    // sightings: p is taken as 0 and the cascade expected to cost 0.4 + 0.9.
    const chance = [...skewed(16, ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']), ...Array.from({ length: 14 }, (_, i) => `once-${i}`)];

    it('does not specialize where the cascade would cost more than the oracle, though accurate enough', () => {
      expect(explore(costly(0.4), chance)).toBeUndefined();
      // Without a known cost it enters, at an estimate of 0.948 ≥ 0.8.
      expect(explore(costly(), chance)?.dominant).toHaveLength(8);
      // A window truly skewed to its classes passes: 0.4 + 0.25 = 0.65.
      expect(explore(costly(0.4), skewed(30))?.dominant).toEqual(['a', 'b', 'c']);
    });

    it('leaves when the share that fell through in its last calls makes it cost more than the oracle alone, before its accuracy says so', () => {
      const run = (w: Weg<string>): number => {
        specialize(w);
        let calls = 0;
        while (calls < 30 && w.exploited({ answeredItself: false, answer: `new-${calls}` }) === undefined) calls += 1;
        return calls + 1;
      };
      // Judged once w_min = 30 calls are in: 0.4 + 30/30 ≥ 1.
      expect(run(costly(0.4))).toBe(30);
      expect(run(costly())).toBe(31); // accuracy alone: 0.9 at worst, above 0.8; it stays
    });

    it('remembers what a template let fall through for a dominant set where it cost too much: not tried again for 3,000 inputs, another set is', () => {
      const w = costly(0.4);
      specialize(w);
      // Half of the calls fell through: 0.4 + 0.5 < 1, so it stays; then more: it leaves.
      for (let i = 0; i < 30; i++) expect(w.exploited({ answeredItself: i % 2 === 0, answer: 'a' })).toBeUndefined();
      for (let i = 0; i < 30 && w.status().phase === 'specialized'; i++) w.exploited({ answeredItself: false, answer: 'a' });
      expect(w.status()).toMatchObject({ phase: 'window', epoch: 2 });
      const leftAt = w.status().inputs;
      // The window it was trained on before (the behaviour's share 0.25) now reads the 0.6 its calls showed.
      expect(explore(w, skewed(30))).toBeUndefined();
      // A fresh WEG on the same labels enters, and one that left the same way enters on another D.
      expect(explore(costly(0.4), skewed(30))?.dominant).toEqual(['a', 'b', 'c']);
      const other = costly(0.4);
      specialize(other);
      for (let i = 0; i < 60 && other.status().phase === 'specialized'; i++) other.exploited({ answeredItself: false, answer: 'a' });
      expect(other.status()).toMatchObject({ phase: 'window', epoch: 2 });
      expect(explore(other, skewed(30, ['x', 'y', 'z']))?.dominant).toEqual(['x', 'y', 'z']);
      // The same set again once 3,000 inputs have passed.
      let request;
      for (let i = 0; !request && i < 4000; i++) {
        w.next();
        request = w.explored(['a', 'b', 'c'][i % 3]!);
      }
      expect(request?.dominant.sort()).toEqual(['a', 'b', 'c']);
      expect(w.status().inputs - leftAt).toBe(3001);
    });

    it('keeps nothing from a phase that ended for accuracy: its calls fell through for inputs outside D', () => {
      // Free while specialized (never too costly), 0.4 when a template is chosen.
      let cost = 0.4;
      const w = createWeg<string>({ oracleAccuracy: 1, accuracyMargin: -0.2, relativeCost: () => cost }, [{ name: 'compact', behaviour: () => behaviour }], () => 0);
      specialize(w);
      cost = 0;
      // Two calls in three fall through, the others answered right and spot-checked, until one is wrong (τ_FP).
      for (let i = 0; i < 29; i++) w.exploited(i % 3 === 0 ? { answeredItself: true, answer: 'a', oracleLabel: 'a' } : { answeredItself: false, answer: 'b' });
      expect(w.exploited({ answeredItself: true, answer: 'a', oracleLabel: 'b' })).toBe('exit');
      cost = 0.4;
      // 0.4 + the 0.67 that fell through would not pay; the behaviour's 0.25 does.
      expect(explore(w, skewed(30))?.dominant.sort()).toEqual(['a', 'b', 'c']);
    });
  });

  it('merges windows when the dominant classes continue (adaptive window), and starts afresh when they change', () => {
    const w = weg(() => 0);
    specialize(w);
    w.exploited({ answeredItself: true, answer: 'a', oracleLabel: 'x' });
    expect(w.status().phase).toBe('window');
    // The same classes again: the old epoch continues, w = 30 + the last 30 labels before (its w).
    specialize(w);
    expect(w.status()).toMatchObject({ phase: 'specialized', window: 60, transitions: 2 });
    w.exploited({ answeredItself: true, answer: 'a', oracleLabel: 'x' });
    // Other classes: a new epoch with a window of w_min.
    specialize(w, skewed(30, ['d', 'e', 'f']));
    expect(w.status()).toMatchObject({ phase: 'specialized', window: 30, dominant: ['d', 'e', 'f'], transitions: 3, epoch: 3 });
  });

  it('grows a merged window by w_min each epoch up to maxWindow, and no further', () => {
    const w = weg(() => 0, { maxWindow: 75 });
    const windows: number[] = [];
    for (let epoch = 0; epoch < 5; epoch++) {
      specialize(w);
      windows.push(w.status().window);
      w.exploited({ answeredItself: true, answer: 'a', oracleLabel: 'x' });
    }
    expect(windows).toEqual([30, 60, 75, 75, 75]);
  });

  it('keeps only the labels it reads: after a long exploration the next window is not the whole history', () => {
    const w = weg();
    // 20,000 inputs in which a, b and c make up a third (never enough to specialize on), then one exit.
    explore(w, Array.from({ length: 20_000 }, (_, i) => (i % 3 === 0 ? 'abc'[i % 9 / 3]! : `c${i}`)));
    expect(w.status()).toMatchObject({ phase: 'selecting', window: 30 });
    specialize(w);
    w.exploited({ answeredItself: true, answer: 'a', oracleLabel: 'x' });
    specialize(w);
    expect(w.status().window).toBeLessThanOrEqual(60);
  });

  it('does not count an input that gave no outcome', () => {
    const w = weg();
    specialize(w);
    const before = w.status();
    w.abandoned(w.next());
    expect(w.status()).toMatchObject({ inputs: before.inputs, specialized: before.specialized });
  });

  it('keeps exploring on unskewed input: no class seen twice, no dominant set, the oracle on every input', () => {
    const w = weg();
    expect(explore(w, Array.from({ length: 200 }, (_, i) => `c${i}`))).toBeUndefined();
    expect(w.status()).toMatchObject({ phase: 'selecting', dominant: [], specialized: 0, inputs: 200 });
  });

  it('goes on exploring after a failed training, and decides again', () => {
    const w = weg();
    explore(w, skewed(30));
    w.trainingFailed();
    expect(w.status().phase).toBe('selecting');
    const again = explore(w, ['a']);
    expect(again?.template).toBe(template);
    expect(again?.dominant.sort()).toEqual(['a', 'b', 'c']);
  });
});

describe('WEG on a simulated trace (thesis §5.4: frames every 1/6 s, simulated classifiers)', () => {
  // Faces as `simulate weg` has them: the oracle VGG-Face (2622 classes, 95.8%, 28.8 ms) and the
  // template F2 (1.93 ms, retrained in 4 s), with an assumed behaviour once specialized.
  const faces = TASKS.face.classifiers;
  const run = (segments: TraceSegment[]) => simulateWeg(segments, faces, { accuracyMargin: -0.05 }, 7);

  it('specializes on 5 minutes of 5 faces at 90%: several times cheaper, as accurate as the oracle', () => {
    const result = run([{ frames: 1800, dominant: 5, skew: 0.9 }]);
    expect(result.speedup).toBeGreaterThan(3);
    expect(result.accuracy).toBeGreaterThan(result.oracleAccuracy - 0.02);
    expect(result.status.transitions).toBeGreaterThanOrEqual(1);
  });

  it('stays with the oracle on unskewed input: the same cost and accuracy', () => {
    const result = run([{ frames: 1800, dominant: 0, skew: 0 }]);
    expect(result.status.specialized).toBe(0);
    expect(result.speedup).toBeCloseTo(1, 6);
    expect(result.accuracy).toBe(result.oracleAccuracy);
  });

  it('gains nothing, and loses little accuracy, when the faces change every 10 s', () => {
    const result = run(Array.from({ length: 30 }, () => ({ frames: 60, dominant: 5, skew: 0.9 })));
    expect(result.speedup).toBeLessThan(1.2);
    expect(result.accuracy).toBeGreaterThan(result.oracleAccuracy - 0.02);
    // It notices each change: it leaves the specialized phase and enters it again.
    expect(result.status.epoch).toBeGreaterThan(10);
  });
});

describe('`panoptes simulate weg`: the thesis Table 5.2 face rows', () => {
  it('each within ±25% of the thesis speedup and 2 points of its accuracy, with simulated classifiers', () => {
    const faces = wegTable52().rows.filter((r) => r.task === 'face' && !r.trace.startsWith('switch'));
    expect(faces).toHaveLength(6);
    for (const r of faces) {
      expect(Math.abs(r.speedup / r.thesis.speedup - 1), `${r.trace}: ${r.speedup.toFixed(2)}× against ${r.thesis.speedup}×`).toBeLessThanOrEqual(0.25);
      expect(Math.abs(r.accuracy - r.thesis.accuracy), `${r.trace}: ${r.accuracy.toFixed(1)}% against ${r.thesis.accuracy}%`).toBeLessThanOrEqual(2);
    }
  });
});
