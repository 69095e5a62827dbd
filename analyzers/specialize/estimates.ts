/**
 * The numbers WEG decides by (thesis ch. 5 and appendix C): how likely a window of oracle labels
 * is to show a dominant class at least k times, and the accuracy of a cascade of a specialized
 * model in front of the oracle at a given skew (Eq. 5.1).
 */

/** A class is dominant in a window when the oracle gave it at least k times there. */
export function dominantClasses<Label>(window: readonly Label[], k: number): Set<Label> {
  const counts = new Map<Label, number>();
  for (const label of window) counts.set(label, (counts.get(label) ?? 0) + 1);
  return new Set([...counts].filter(([, count]) => count >= k).map(([label]) => label));
}

/** Appendix C's minimum support: k = 2 for windows under 90 labels, 3 from 90. */
export const minimumSupport = (window: number): number => (window < 90 ? 2 : 3);

export interface SkewedStream {
  /** Classes the oracle knows, N. */
  classes: number;
  /** The oracle's accuracy, a*. */
  oracleAccuracy: number;
  /** Dominant classes, n, and the share of inputs from them, p. */
  dominant: number;
  skew: number;
}

/**
 * Eqs. C.1 and C.2: the chance the oracle outputs one given dominant class, and one given
 * non-dominant class, when its errors spread evenly over the other N − 1 classes.
 */
export function oracleOutputChances({ classes: N, oracleAccuracy: a, dominant: n, skew: p }: SkewedStream): { dominant: number; other: number } {
  return {
    dominant: (p * a + (p * (1 - a) * (n - 1)) / (N - 1) + ((1 - p) * (1 - a) * n) / (N - 1)) / n,
    other: ((1 - p) * a + ((1 - p) * (1 - a) * (N - n - 1)) / (N - 1) + (p * (1 - a) * (N - n)) / (N - 1)) / (N - n),
  };
}

/**
 * Table C.1: p_in, the chance a dominant class shows at least k times in a window of w oracle
 * labels, and p_out, the same for a single non-dominant class.
 */
export function windowDetection(stream: SkewedStream, window: number, k: number): { pIn: number; pOut: number } {
  const chances = oracleOutputChances(stream);
  return { pIn: atLeast(k, window, chances.dominant), pOut: atLeast(k, window, chances.other) };
}

/** P[Binomial(n, q) ≥ k]. */
export function atLeast(k: number, n: number, q: number): number {
  if (k <= 0) return 1;
  if (q >= 1) return k <= n ? 1 : 0;
  let below = 0;
  let term = Math.pow(1 - q, n); // P[X = 0]
  for (let i = 0; i < k; i++) {
    below += term;
    term *= ((n - i) / (i + 1)) * (q / (1 - q));
  }
  return Math.max(0, 1 - below);
}

/** How a template specialized to n dominant classes behaves, measured offline (averaged over random dominant sets). */
export interface SpecializedBehaviour {
  /** a_in: accuracy on inputs of the dominant classes. */
  aIn: number;
  /** e_in→out: share of dominant inputs it calls "other" (they fall through to the oracle). */
  eInOut: number;
  /** a_out: share of non-dominant inputs it correctly calls "other". */
  aOut: number;
}

/**
 * Eq. 5.1: the cascade's accuracy at skew p, a = p·a_in + p·e_in→out·a* + (1 − p)·a_out·a*:
 * dominant inputs it answers, dominant inputs it passes to the oracle, and non-dominant inputs
 * it passes to the oracle. (A non-dominant input it mistakes for a dominant class is wrong.)
 */
export function cascadeAccuracy(behaviour: SpecializedBehaviour, skew: number, oracleAccuracy: number): number {
  const { aIn, eInOut, aOut } = behaviour;
  return skew * aIn + skew * eInOut * oracleAccuracy + (1 - skew) * aOut * oracleAccuracy;
}

/** The share of inputs a cascade passes on to the oracle at skew p: dominant ones it calls "other", and the others it rightly does. */
export function fallThroughShare(behaviour: SpecializedBehaviour, skew: number): number {
  return skew * behaviour.eInOut + (1 - skew) * behaviour.aOut;
}

/**
 * A template's behaviour for any n from a grid measured at some n (the thesis: 10 random dominant
 * sets per n), linearly interpolated between grid points and held at the ends.
 */
export function behaviourByDominant(grid: readonly ({ dominant: number } & SpecializedBehaviour)[]): (dominant: number) => SpecializedBehaviour {
  if (grid.length === 0) throw new RangeError('behaviourByDominant: an empty grid');
  const points = [...grid].sort((a, b) => a.dominant - b.dominant);
  return (n) => {
    const upper = points.findIndex((p) => p.dominant >= n);
    if (upper === 0) return points[0]!;
    if (upper === -1) return points.at(-1)!;
    const [a, b] = [points[upper - 1]!, points[upper]!];
    const t = (n - a.dominant) / (b.dominant - a.dominant);
    const mix = (x: number, y: number): number => x + t * (y - x);
    return { aIn: mix(a.aIn, b.aIn), eInOut: mix(a.eInOut, b.eInOut), aOut: mix(a.aOut, b.aOut) };
  };
}
