/**
 * Seeded randomness for the simulator: a run is a pure function of its seed, so every figure
 * can be replayed and two policies can be compared on the very same arrivals.
 */

/** mulberry32: small and fast, with good enough statistics for arrival processes. */
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

/**
 * The seed of one stream of a run (one session's arrivals, the fan-out draws): independent of
 * the other streams, so scaling one session's load leaves the others' draws unchanged.
 */
export function streamSeed(seed: number, stream: number): number {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(stream + 1, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  return (h ^ (h >>> 15)) >>> 0;
}
