/**
 * Seeded randomness: a simulation is a pure function of its seed, so every figure can be
 * replayed and two policies compared on the very same draws.
 */

/** mulberry32: small and fast, with good enough statistics for arrival processes and label draws. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
