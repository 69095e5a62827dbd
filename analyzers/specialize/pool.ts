import type { HeadJob, TrainedHead } from '../training/index.js';
import type { SpecializedBehaviour } from './estimates.js';

/**
 * A labelled pool pre-forwarded through a template's feature layers (thesis §5.2): one row of
 * features per image, with its label. Specializing trains only the top layer, on these rows.
 */
export interface LabelledPool {
  featureCount: number;
  /** Row-major [labels.length, featureCount]. */
  features: Float32Array;
  labels: readonly string[];
}

export interface TrainingSetOptions {
  /** Share of the rows from the dominant classes; the rest are "other" (thesis: 50% faces, 60% objects). */
  skew: number;
  /** At most this many rows in all, dominant classes sharing their part evenly: it bounds the retraining time. */
  maxRows: number;
  random: () => number;
}

/**
 * The rows h_D is trained on: the dominant classes' rows as classes 0..n−1, each class its even
 * share of `maxRows · skew` (rows repeated where it has fewer), and, as class n ("other"), rows
 * of any other class, so that the dominant classes make up `skew` of the set. Returns copies the
 * caller may hand over to the training thread.
 */
export function trainingSet(pool: LabelledPool, dominant: readonly string[], options: TrainingSetOptions): Omit<HeadJob, 'featureCount'> {
  const { skew, maxRows, random } = options;
  if (!(skew > 0 && skew < 1)) throw new RangeError(`trainingSet: skew ${skew} is not between 0 and 1 (the dominant classes' share of the rows)`);
  if (!(maxRows >= 1)) throw new RangeError(`trainingSet: maxRows ${maxRows} is not a positive number of rows`);
  const classOf = new Map(dominant.map((label, i) => [label, i]));
  const byClass = dominant.map(() => [] as number[]);
  const others: number[] = [];
  pool.labels.forEach((label, row) => {
    const c = classOf.get(label);
    if (c === undefined) others.push(row);
    else byClass[c]!.push(row);
  });
  const perClass = Math.max(1, Math.floor((maxRows * skew) / Math.max(1, dominant.length)));
  // A class with fewer rows than its share gives them again (in a new order each time), so the
  // "other" rows stay many enough to stand for every other class: a small pool (a stream's own)
  // would otherwise train h_D on a handful of them, and h_D would claim the classes it never saw.
  const rows = byClass.flatMap((classRows) => sampleRepeating(classRows, perClass, random));
  const otherCount = Math.min(others.length, Math.round((rows.length * (1 - skew)) / skew));
  rows.push(...sample(others, otherCount, random));
  const { featureCount } = pool;
  const features = new Float32Array(rows.length * featureCount);
  const labels = new Int32Array(rows.length);
  rows.forEach((row, i) => {
    features.set(pool.features.subarray(row * featureCount, (row + 1) * featureCount), i * featureCount);
    labels[i] = classOf.get(pool.labels[row]!) ?? dominant.length;
  });
  return { features, labels, classes: dominant.length + 1 };
}

/** The template's behaviour at one n, averaged over the dominant sets tried. */
export interface MeasuredBehaviour extends SpecializedBehaviour {
  dominant: number;
  /** Dominant sets trained and tested. */
  sets: number;
  /** Mean retraining time, ms. */
  trainMs: number;
}

export interface BehaviourOptions extends Omit<TrainingSetOptions, 'random'> {
  /** The n to measure at; those larger than the classes that have rows in both pools are left out. */
  dominantCounts: readonly number[];
  /** @defaultValue 10 (the thesis') */
  setsPerCount?: number;
  /** A class is drawn into D only with at least this many rows in each pool. @defaultValue 5 */
  minRows?: number;
  random: () => number;
  train: (job: HeadJob) => Promise<TrainedHead>;
}

/**
 * Eq. 5.1's inputs for a template, measured as the thesis does (§5.3): for each n, heads trained
 * on `train` for random dominant sets, tested on the held-out `test` rows. a_in: dominant rows
 * given their class; e_in→out: dominant rows called "other"; a_out: other rows called "other".
 */
export async function measureBehaviour(train: LabelledPool, test: LabelledPool, options: BehaviourOptions): Promise<MeasuredBehaviour[]> {
  const { dominantCounts, setsPerCount = 10, minRows = 5, random } = options;
  const count = (labels: readonly string[]) => labels.reduce((m, l) => m.set(l, (m.get(l) ?? 0) + 1), new Map<string, number>());
  const [inTrain, inTest] = [count(train.labels), count(test.labels)];
  const classes = [...inTrain.keys()].filter((l) => inTrain.get(l)! >= minRows && (inTest.get(l) ?? 0) >= minRows).sort();
  const grid: MeasuredBehaviour[] = [];
  for (const n of dominantCounts.filter((n) => n >= 1 && n < classes.length)) {
    const sum = { aIn: 0, eInOut: 0, aOut: 0, trainMs: 0 };
    for (let set = 0; set < setsPerCount; set++) {
      const dominant = sample(classes, n, random);
      const job = trainingSet(train, dominant, { ...options, random });
      const head = await options.train({ ...job, featureCount: train.featureCount, seed: set + 1, evaluate: test.features.slice() });
      const predicted = head.predictions!;
      const classOf = new Map(dominant.map((label, i) => [label, i]));
      const tally = { inRows: 0, inRight: 0, inOther: 0, outRows: 0, outOther: 0 };
      test.labels.forEach((label, row) => {
        const c = classOf.get(label);
        if (c === undefined) {
          tally.outRows += 1;
          if (predicted[row] === n) tally.outOther += 1;
        } else {
          tally.inRows += 1;
          if (predicted[row] === c) tally.inRight += 1;
          else if (predicted[row] === n) tally.inOther += 1;
        }
      });
      sum.aIn += tally.inRight / tally.inRows;
      sum.eInOut += tally.inOther / tally.inRows;
      sum.aOut += tally.outRows === 0 ? 1 : tally.outOther / tally.outRows;
      sum.trainMs += head.trainMs;
    }
    const mean = (x: number) => x / setsPerCount;
    grid.push({ dominant: n, sets: setsPerCount, aIn: mean(sum.aIn), eInOut: mean(sum.eInOut), aOut: mean(sum.aOut), trainMs: mean(sum.trainMs) });
  }
  return grid;
}

/** `count` of `items` (none if there are none), all of them in a new order each time round while fewer than `count` are left. */
function sampleRepeating<T>(items: readonly T[], count: number, random: () => number): T[] {
  const drawn: T[] = [];
  while (items.length > 0 && drawn.length < count) drawn.push(...sample(items, count - drawn.length, random));
  return drawn;
}

/** Up to `count` of `items`, drawn without replacement. */
export function sample<T>(items: readonly T[], count: number, random: () => number): T[] {
  const copy = [...items];
  const n = Math.max(0, Math.min(count, copy.length));
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(random() * (copy.length - i));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, n);
}
