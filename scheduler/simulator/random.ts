import { seededRandom } from '../../core/index.js';

export { seededRandom };

/**
 * The seed of one stream of a run (one session's arrivals, the fan-out draws): independent of
 * the other streams, so scaling one session's load leaves the others' draws unchanged.
 */
export function streamSeed(seed: number, stream: number): number {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(stream + 1, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  return (h ^ (h >>> 15)) >>> 0;
}
