import { seededRandom } from '../../core/index.js';
import type { SpecializedBehaviour } from './estimates.js';
import { createWeg, type WegParams, type WegStatus } from './weg.js';

/**
 * WEG over a synthetic trace with simulated classifiers, the thesis' §5.4 setting: frames every
 * 1/6 s in segments of n dominant classes at skew p (images uniform within a class), or uniform
 * over all classes (n = 0). The oracle is right with probability a* and otherwise names another
 * class at random; the specialized model behaves as its template's (a_in, e_in→out, a_out) say.
 * Model time counts every run: the oracle's, the cascade's, its fall-throughs and spot checks.
 */

export interface SimulatedClassifiers {
  /** N: classes the oracle knows. */
  classes: number;
  oracle: { accuracy: number; costMs: number };
  template: { name: string; costMs: number; behaviour: (dominant: number) => SpecializedBehaviour; retrainMs: number };
}

export interface TraceSegment {
  frames: number;
  /** n dominant classes (0: uniform over all classes) and the share p of frames from them. */
  dominant: number;
  skew: number;
}

export interface WegSimulation {
  frames: number;
  /** Share of frames whose answer is the true class; the oracle alone's on the same frames. */
  accuracy: number;
  oracleAccuracy: number;
  /** Model time per frame, ms: WEG's, and the oracle's alone. */
  wegMs: number;
  oracleMs: number;
  speedup: number;
  status: WegStatus<number>;
}

/** Frames arrive every 1/6 s (§5.4). */
const FRAME_MS = 1000 / 6;

export function simulateWeg(segments: readonly TraceSegment[], classifiers: SimulatedClassifiers, params: Omit<WegParams, 'oracleAccuracy'>, seed = 1): WegSimulation {
  const random = seededRandom(seed);
  const { classes: N, oracle, template } = classifiers;
  const pick = (n: number): number => Math.floor(random() * n);
  const compact = { name: template.name, behaviour: template.behaviour };
  const weg = createWeg<number>({ ...params, oracleAccuracy: oracle.accuracy, relativeCost: () => template.costMs / oracle.costMs }, [compact], random);
  const oracleSays = (truth: number): number => (random() < oracle.accuracy ? truth : (truth + 1 + pick(N - 1)) % N);

  let [frames, right, oracleRight, modelMs] = [0, 0, 0, 0];
  let training: { readyAt: number; dominant: number[] } | undefined;
  let specialized: { dominant: Set<number>; list: number[]; behaviour: SpecializedBehaviour } | undefined;
  for (const segment of segments) {
    // The segment's dominant classes: n distinct classes at random.
    const dominant = new Set<number>();
    while (dominant.size < Math.min(segment.dominant, N)) dominant.add(pick(N));
    const dominantList = [...dominant];
    const truthOf = (): number => {
      if (dominantList.length > 0 && random() < segment.skew) return dominantList[pick(dominantList.length)]!;
      for (;;) {
        const label = pick(N);
        if (!dominant.has(label)) return label;
      }
    };
    for (let i = 0; i < segment.frames; i++, frames++) {
      const truth = truthOf();
      if (training && frames >= training.readyAt) {
        weg.trained(compact, training.dominant);
        specialized = { dominant: new Set(training.dominant), list: training.dominant, behaviour: template.behaviour(training.dominant.length) };
        training = undefined;
      }
      const labelled = oracleSays(truth);
      if (labelled === truth) oracleRight += 1;
      const action = weg.next();
      let answer: number;
      if (action.run === 'oracle') {
        modelMs += oracle.costMs;
        answer = labelled;
        const request = weg.explored(labelled);
        if (request) training = { readyAt: frames + Math.ceil(template.retrainMs / FRAME_MS), dominant: request.dominant };
      } else {
        const s = specialized!;
        modelMs += template.costMs;
        const said = specializedSays(truth, s, random);
        const answeredItself = said !== undefined;
        answer = said ?? labelled;
        if (!answeredItself) modelMs += oracle.costMs;
        else if (action.spotCheck) modelMs += oracle.costMs;
        weg.exploited({ answeredItself, answer, ...(answeredItself && action.spotCheck ? { oracleLabel: labelled } : {}) });
      }
      if (answer === truth) right += 1;
    }
  }
  const wegMs = modelMs / frames;
  return { frames, accuracy: right / frames, oracleAccuracy: oracleRight / frames, wegMs, oracleMs: oracle.costMs, speedup: oracle.costMs / wegMs, status: weg.status() };
}

/** The specialized model on one input: a class of D, or undefined for "other" (it falls through). */
function specializedSays(truth: number, s: { dominant: Set<number>; list: number[]; behaviour: SpecializedBehaviour }, random: () => number): number | undefined {
  const wrongDominant = (): number | undefined => {
    const others = s.list.filter((c) => c !== truth);
    return others.length === 0 ? undefined : others[Math.floor(random() * others.length)];
  };
  if (s.dominant.has(truth)) {
    const r = random();
    if (r < s.behaviour.aIn) return truth;
    if (r < s.behaviour.aIn + s.behaviour.eInOut) return undefined;
    return wrongDominant();
  }
  return random() < s.behaviour.aOut ? undefined : wrongDominant();
}
