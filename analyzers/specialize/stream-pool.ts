import type { HeadJob, TrainedHead } from '../training/index.js';
import { behaviourByDominant, type SpecializedBehaviour } from './estimates.js';
import { measureBehaviour, type LabelledPool, type MeasuredBehaviour } from './pool.js';

/**
 * A stream's own labelled pool for one template. The thesis pre-forwards a pool labelled offline
 * (§5.2); a deployment has none, so the stream labels its own: inputs the oracle labelled,
 * pre-forwarded once through the template's feature layers, at most `rowsPerClass` per class, a
 * uniform sample of those seen (reservoir sampling: whether an input stays is decided before its
 * features are computed, so most inputs cost nothing here). It keeps rows of `maxClasses` classes
 * at most, those seen most recently: a stream of many classes (identities, a thousand ImageNet
 * labels) lets the longest unseen go, and dominant sets are drawn from recent classes anyway.
 *
 * Eq. 5.1 needs the template's behaviour once specialized. It is measured on the pool the
 * thesis' way (`measureBehaviour`: heads for random dominant sets, trained on half of each
 * class's rows and tested on the other half) once two classes have enough rows, and again
 * whenever the classes with enough rows have grown by half. Until then its behaviour is unknown
 * and WEG does not choose it.
 */

/** n at which the behaviour is measured; those not below the classes with rows are left out. */
const GRID = [1, 2, 5, 10, 15, 20];

export interface StreamPoolOptions {
  rowsPerClass: number;
  /** Classes kept. @defaultValue 64 */
  maxClasses?: number;
  /** A class is drawn into measured dominant sets only with this many rows in each half. @defaultValue 5 */
  minRows?: number;
  /** The training set's skew and size, as for h_D itself. */
  training: { skew: number; maxRows: number };
  random: () => number;
}

/** Where an admitted input's features go. */
export interface PoolSlot {
  readonly label: string;
  readonly slot: number;
  /** The class's rows when it was admitted: a class let go (and maybe admitted again since) has others. */
  readonly rows: readonly (Float32Array | undefined)[];
}

export interface StreamPool {
  /** Where an input the oracle labelled `label` goes in the pool, or undefined when it is not kept. */
  admit(label: string): PoolSlot | undefined;
  /** The features of an admitted input; copied. Nothing is kept for a class let go since the input was admitted. */
  fill(at: PoolSlot, features: Float32Array): void;
  /** The rows kept now. */
  readonly pool: LabelledPool;
  /** Undefined until measured, and for more dominant classes than it was measured at. */
  behaviour(dominant: number): SpecializedBehaviour | undefined;
  /** The last measurement, one entry per n. */
  readonly measured: readonly MeasuredBehaviour[];
  /** Measures the behaviour again where the pool has grown enough since the last time; resolves when done (at once when not due). */
  measureIfDue(train: (job: HeadJob) => Promise<TrainedHead>): Promise<void>;
}

export function createStreamPool(options: StreamPoolOptions): StreamPool {
  const { rowsPerClass, random } = options;
  const minRows = options.minRows ?? 5;
  const maxClasses = options.maxClasses ?? 64;
  const rows = new Map<string, (Float32Array | undefined)[]>();
  /** Inputs seen per class kept, the class seen longest ago first. */
  const seen = new Map<string, number>();
  let snapshot: LabelledPool | undefined;
  let featureCount: number | undefined;
  let measured: MeasuredBehaviour[] = [];
  let estimate: (dominant: number) => SpecializedBehaviour | undefined = () => undefined;
  let measuredClasses = 0;
  /** Classes let go since the last measurement: once half the measured number, it is measured again. */
  let letGo = 0;
  let measuring = false;

  const filled = (label: string): Float32Array[] => (rows.get(label) ?? []).filter((r): r is Float32Array => r !== undefined);
  const poolOf = (entries: readonly [string, Float32Array][]): LabelledPool => {
    const width = featureCount ?? 0;
    const features = new Float32Array(entries.length * width);
    entries.forEach(([, row], i) => features.set(row, i * width));
    return { featureCount: width, features, labels: entries.map(([label]) => label) };
  };

  return {
    admit(label) {
      const count = (seen.get(label) ?? 0) + 1;
      seen.delete(label);
      seen.set(label, count);
      let slots = rows.get(label);
      if (!slots) {
        if (rows.size >= maxClasses) {
          const [oldest] = seen.keys();
          seen.delete(oldest!);
          rows.delete(oldest!);
          letGo += 1;
          snapshot = undefined;
        }
        rows.set(label, (slots = []));
      }
      if (slots.length < rowsPerClass) return { label, slot: slots.push(undefined) - 1, rows: slots };
      const slot = Math.floor(random() * count);
      return slot < rowsPerClass ? { label, slot, rows: slots } : undefined;
    },
    fill({ label, slot, rows: admitted }, features) {
      const slots = rows.get(label);
      if (slots !== admitted) return;
      featureCount ??= features.length;
      if (features.length !== featureCount) throw new RangeError(`stream pool: ${features.length} features for class ${label}; the pool's rows have ${featureCount}`);
      slots[slot] = features.slice();
      snapshot = undefined;
    },
    get pool() {
      snapshot ??= poolOf([...rows.keys()].flatMap((label) => filled(label).map((row) => [label, row] as [string, Float32Array])));
      return snapshot;
    },
    // Not beyond the largest n measured: a pool of two classes says nothing of five.
    behaviour: (dominant) => (dominant <= (measured.at(-1)?.dominant ?? 0) ? estimate(dominant) : undefined),
    get measured() {
      return measured;
    },
    async measureIfDue(train) {
      const eligible = [...rows.keys()].filter((label) => filled(label).length >= 2 * minRows);
      const grown = eligible.length >= Math.max(2, Math.ceil(measuredClasses * 1.5));
      const changed = measuredClasses > 0 && letGo >= measuredClasses / 2;
      if (measuring || eligible.length < 2 || !(grown || changed)) return;
      measuring = true;
      try {
        // Every other row of each class to each half, so both hold every class.
        const halves: [string, Float32Array][][] = [[], []];
        for (const label of rows.keys()) filled(label).forEach((row, i) => halves[i % 2]!.push([label, row]));
        const grid = await measureBehaviour(poolOf(halves[0]!), poolOf(halves[1]!), { ...options.training, dominantCounts: GRID, minRows, random, train });
        if (grid.length > 0) {
          measured = grid;
          estimate = behaviourByDominant(grid);
          measuredClasses = eligible.length;
          letGo = 0;
        }
      } finally {
        measuring = false;
      }
    },
  };
}
