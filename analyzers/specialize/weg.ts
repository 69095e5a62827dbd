import { cascadeAccuracy, dominantClasses, fallThroughShare, minimumSupport, type SpecializedBehaviour } from './estimates.js';

/**
 * Windowed ε-Greedy, thesis Algorithm 5.1, for one stream at one DAG node: when to explore (run
 * the oracle h*), when to specialize (train h_D on the dominant classes D), when to exploit (run
 * the cascade ĥ_D: h_D, falling through to h* on "other") and when to go back. A pure state
 * machine: `next()` says what to run on the next input, and the caller reports what ran.
 *
 * Where the thesis is silent or inconsistent (`../shared/research/shen-thesis.md` §4.5):
 * - Line 5's "within τ_r": the dominant sets differ in at most τ_r classes (symmetric difference).
 * - Line 18's spot check: only inputs the specialized model answered itself, each with
 *   probability ε, so n* ÷ (n_c·ε) estimates how often its answers disagree with the oracle.
 * - p* in the specialized phase ("derived from S_j" in line 20, from the ε samples in the text):
 *   the share in D of the last w cascade calls, counting an input h_D answered as in D (its
 *   claims are what τ_FP checks) and a fall-through by the oracle's label of it, which the
 *   cascade has anyway. Until w calls have been made, the window's labels fill the rest. The
 *   spot checks alone come from inputs h_D answered, mostly in D, and would hide a change of
 *   distribution for thousands of inputs.
 * - Templates: the cheapest (first listed) whose estimate passes.
 * - Cost (the thesis judges accuracy only): where a template's cost r relative to the oracle's
 *   is known, WEG specializes only when the cascade is expected to cost less than the oracle
 *   alone, r + p·e_in→out + (1 − p)·a_out < 1 (the rest being the share that falls through), and
 *   after w_min cascade calls leaves when r plus the share that fell through in the last w calls
 *   reaches 1. Here p is taken leaving each label out: the share of the window's labels whose
 *   class would be dominant without them (seen k + 1 times or more). D is picked from the same
 *   window, so its raw share overstates p: on uniform input over 26 classes, 30 labels show D's
 *   classes two thirds of the time where the next labels show them a third of it, and the
 *   cascade, passing three inputs in four to the oracle, costs more than the oracle alone.
 *   A template's behaviour is measured on the stream's pool, and a stream's inputs may fall
 *   through more often than its pool's: where WEG leaves because the cascade costs too much,
 *   the share of its last w calls that fell through is kept for that template and D, and stands
 *   for the share Eq. C.1/C.2's behaviour predicts for the next REMEMBERED_INPUTS inputs (a
 *   stream's content changes; the same D may pay later). A phase that ends for accuracy says
 *   nothing of the template's cost: its calls fell through for inputs outside D.
 * - Training runs while the oracle keeps serving; its labels go on extending the window.
 * - After an exit, the previous epoch's labels are its oracle labels (window and spot checks),
 *   its last w only: S_j keeps no more, so a long exploration cannot make the next window (and
 *   D) span the whole history.
 */

export interface WegParams {
  /** The oracle's accuracy a*. */
  oracleAccuracy: number;
  /** τ_a: the cascade's estimated accuracy must reach a* + τ_a (−0.05 for faces, +0.05 otherwise). */
  accuracyMargin: number;
  /** w_min. @defaultValue 30 */
  minWindow?: number;
  /** τ_r. @defaultValue 2 */
  sameClasses?: number;
  /** ε. @defaultValue 0.01 */
  epsilon?: number;
  /** τ_FP. @defaultValue 0.5 */
  maxDisagreement?: number;
  /**
   * The most labels a merged window keeps (the thesis sets no bound): a stream whose dominant
   * classes hold for weeks would otherwise grow it by w_min each epoch, and every input's work with it.
   * @defaultValue 3000
   */
  maxWindow?: number;
  /** A template's cost per input as a share of the oracle's, where measured: WEG then also weighs cost (above). */
  relativeCost?: (template: Template) => number | undefined;
}

/** A template h_k: its behaviour once specialized to n classes (Eq. 5.1's inputs), cheapest first. */
export interface Template {
  name: string;
  /** Undefined while it is not known (not measured yet): the template is not chosen. */
  behaviour: (dominant: number) => SpecializedBehaviour | undefined;
}

/** What to run on the next input. */
export type WegAction =
  | { run: 'oracle' }
  /** The cascade; where the specialized model answers itself and `spotCheck` is set, the oracle too. */
  | { run: 'cascade'; spotCheck: boolean };

export type WegPhase = 'window' | 'selecting' | 'training' | 'specialized';

export interface WegStatus<Label> {
  phase: WegPhase;
  /** The epoch j. */
  epoch: number;
  /** w: the window the dominant classes are taken from. */
  window: number;
  dominant: Label[];
  template?: string;
  /** The last estimate of the cascade's accuracy (Eq. 5.1). */
  estimate?: number;
  /** Table 5.4: inputs seen, those in the specialized phase, cascade calls that fell through, entries into the specialized phase. */
  inputs: number;
  specialized: number;
  fellThrough: number;
  transitions: number;
  /** Σ|D| and Σw over the entries into the specialized phase, for their means. */
  dominantSum: number;
  windowSum: number;
}

export interface Weg<Label> {
  next(): WegAction;
  /** The oracle's label for an input `next` sent to the oracle. Returns what to train when WEG decides to specialize. */
  explored(label: Label): { template: Template; dominant: Label[] } | undefined;
  /** h_D is trained for `dominant`: the specialized phase begins (if WEG still waits for it). */
  trained(template: Template, dominant: readonly Label[]): void;
  /** Training failed: WEG goes on exploring and may decide again. */
  trainingFailed(): void;
  /** An input `next` was asked about gave no outcome (its model failed, its request was dropped): it does not count. */
  abandoned(action: WegAction): void;
  /**
   * A cascade's outcome: whether h_D answered itself (not "other"), and the oracle's label where
   * it was spot-checked. Returns 'exit' when WEG leaves the specialized phase.
   */
  exploited(outcome: { answeredItself: boolean; answer: Label; oracleLabel?: Label }): 'exit' | undefined;
  status(): WegStatus<Label>;
}

/** Inputs for which the fall-through a template and D showed stands for their estimated one. */
const REMEMBERED_INPUTS = 3000;
/** The most (template, D) fall-throughs kept, the oldest forgotten first. */
const REMEMBERED_SETS = 64;

export function createWeg<Label>(params: WegParams, templates: readonly Template[], random: () => number = Math.random): Weg<Label> {
  if (templates.length === 0) throw new RangeError('createWeg: at least one template');
  const minWindow = params.minWindow ?? 30;
  const sameClasses = params.sameClasses ?? 2;
  const epsilon = params.epsilon ?? 0.01;
  const maxDisagreement = params.maxDisagreement ?? 0.5;
  const maxWindow = params.maxWindow ?? 3000;
  const threshold = params.oracleAccuracy + params.accuracyMargin;

  let phase: WegPhase = 'window';
  let epoch = 1;
  /** S_{j−1} and S_j: the oracle's labels of the previous epoch and of this one. */
  let previous: Label[] = [];
  let labels: Label[] = [];
  let window = minWindow;
  let dominant = new Set<Label>();
  let template: Template | undefined;
  let estimate: number | undefined;
  /** n_c and n*: answers h_D gave itself, and spot checks where the oracle disagreed. */
  let answered = 0;
  let disagreed = 0;
  /** The specialized phase's last w cascade calls: in D (answered by h_D, or the oracle's label in D) or not, and fallen through to the oracle or not; and the window it began with. */
  let calls: { inDominant: boolean; fellThrough: boolean }[] = [];
  let entryWindow: Label[] = [];
  const counts = { inputs: 0, specialized: 0, fellThrough: 0, transitions: 0, dominantSum: 0, windowSum: 0 };
  /** The share of calls that fell through where a cascade cost too much, by template and D, and the input it was seen at. */
  const fellThroughBefore = new Map<string, { share: number; atInput: number }>();
  const setKey = (t: Template, d: ReadonlySet<Label>): string => JSON.stringify([t.name, [...d].map(String).sort()]);

  const recent = (): Label[] => labels.slice(-window);
  /** The share of the last w cascade calls that fell through to the oracle. */
  const fellThroughLately = (): number => calls.filter((c) => c.fellThrough).length / calls.length;
  /** A label joins S_j; only the last w are ever read, so older ones go (in bulk, not one by one). */
  const remember = (label: Label): void => {
    labels.push(label);
    if (phase !== 'window' && labels.length > 2 * window) labels = labels.slice(-window);
  };
  const skewOf = (d: ReadonlySet<Label>): number => {
    const seen = recent();
    return seen.length === 0 ? 0 : seen.filter((l) => d.has(l)).length / seen.length;
  };
  /** p* in the specialized phase (see above). */
  const cascadeSkew = (): number => {
    const fromWindow = entryWindow.slice(calls.length).filter((l) => dominant.has(l)).length;
    const fromCalls = calls.filter((c) => c.inDominant).length;
    return (fromWindow + fromCalls) / Math.max(window, calls.length);
  };

  /** Lines 8–12: D from the last w labels; the first template whose Eq. 5.1 estimate passes is trained. */
  const select = (): { template: Template; dominant: Label[] } | undefined => {
    const k = minimumSupport(window);
    dominant = dominantClasses(recent(), k);
    const skew = skewOf(dominant);
    // Each label left out of the window D is picked from (see above).
    const unbiasedSkew = skewOf(dominantClasses(recent(), k + 1));
    estimate = undefined;
    for (const candidate of templates) {
      const behaviour = candidate.behaviour(dominant.size);
      if (!behaviour) continue;
      const accuracy = cascadeAccuracy(behaviour, skew, params.oracleAccuracy);
      estimate = Math.max(estimate ?? -Infinity, accuracy);
      const before = fellThroughBefore.get(setKey(candidate, dominant));
      const fallThrough = before && counts.inputs - before.atInput <= REMEMBERED_INPUTS ? before.share : fallThroughShare(behaviour, unbiasedSkew);
      if (dominant.size > 0 && accuracy >= threshold && pays(candidate, fallThrough)) {
        phase = 'training';
        template = candidate;
        return { template: candidate, dominant: [...dominant] };
      }
    }
    return undefined;
  };

  /** Whether a cascade passing `fallThrough` of its inputs to the oracle costs less than the oracle alone (true where the template's cost is not known). */
  const pays = (candidate: Template, fallThrough: number): boolean => {
    const cost = params.relativeCost?.(candidate);
    return cost === undefined || cost + fallThrough < 1;
  };

  /** Lines 2–7: after w_min labels, the old epoch continues if the dominant classes barely changed. */
  const closeWindow = (): void => {
    const before = dominantClasses(previous, minimumSupport(previous.length));
    const now = dominantClasses(labels, minimumSupport(labels.length));
    const changed = [...before].filter((l) => !now.has(l)).length + [...now].filter((l) => !before.has(l)).length;
    if (changed <= sameClasses) labels = [...previous, ...labels].slice(-maxWindow);
    window = labels.length;
    phase = 'selecting';
  };

  const exit = (): 'exit' => {
    epoch += 1;
    previous = labels.slice(-window);
    labels = [];
    phase = 'window';
    template = undefined;
    return 'exit';
  };

  return {
    next() {
      counts.inputs += 1;
      if (phase !== 'specialized') return { run: 'oracle' };
      counts.specialized += 1;
      return { run: 'cascade', spotCheck: random() < epsilon };
    },

    explored(label) {
      remember(label);
      if (phase === 'window') {
        if (labels.length >= minWindow) closeWindow();
        else return undefined;
      }
      return phase === 'selecting' ? select() : undefined;
    },

    trained(trainedTemplate, trainedFor) {
      if (phase !== 'training' || trainedTemplate !== template) return;
      dominant = new Set(trainedFor);
      [answered, disagreed, calls, entryWindow] = [0, 0, [], recent()];
      phase = 'specialized';
      counts.transitions += 1;
      counts.dominantSum += dominant.size;
      counts.windowSum += window;
    },

    trainingFailed() {
      if (phase === 'training') phase = 'selecting';
    },

    abandoned(action) {
      counts.inputs -= 1;
      if (action.run === 'cascade') counts.specialized -= 1;
    },

    exploited({ answeredItself, answer, oracleLabel }) {
      if (phase !== 'specialized') {
        // A cascade decided before WEG left (the same group of inputs): its fall-through still counts.
        if (!answeredItself) counts.fellThrough += 1;
        return undefined;
      }
      // A fall-through's answer is the oracle's label.
      calls = [...calls.slice(1 - window), { inDominant: answeredItself || dominant.has(answer), fellThrough: !answeredItself }];
      if (!answeredItself) counts.fellThrough += 1;
      else {
        answered += 1;
        if (oracleLabel !== undefined) {
          remember(oracleLabel);
          if (oracleLabel !== answer) disagreed += 1;
        }
      }
      // Lines 20–21: the estimate at the current skew, and the spot checks' disagreement rate.
      const behaviour = template!.behaviour(dominant.size);
      estimate = behaviour ? cascadeAccuracy(behaviour, cascadeSkew(), params.oracleAccuracy) : -Infinity;
      const disagreement = answered === 0 ? 0 : disagreed / (answered * epsilon);
      if (estimate < threshold || disagreement > maxDisagreement) return exit();
      const share = fellThroughLately();
      if (calls.length >= minWindow && !pays(template!, share)) {
        const key = setKey(template!, dominant);
        fellThroughBefore.delete(key);
        fellThroughBefore.set(key, { share, atInput: counts.inputs });
        if (fellThroughBefore.size > REMEMBERED_SETS) fellThroughBefore.delete(fellThroughBefore.keys().next().value!);
        return exit();
      }
      return undefined;
    },

    status: () => ({
      phase,
      epoch,
      window,
      dominant: [...dominant],
      ...(template ? { template: template.name } : {}),
      ...(estimate !== undefined ? { estimate } : {}),
      ...counts,
    }),
  };
}
