import type { SimulationResult } from './engine.js';

/**
 * The paper's throughput: the highest load at which at least 99% of requests are good. Found
 * by bisection over a load scale, assuming more load is never better; `evaluate` runs the
 * simulation at a scale, or says the load cannot be planned (undefined), e.g. it needs more
 * GPUs than the experiment has.
 */
export interface MaxGoodLoadOptions {
  /** A scale known or expected to be too much; returned when even it is good. */
  highScale: number;
  /** Bisection steps: the answer is within highScale/2^steps. @defaultValue 10 */
  steps?: number;
  /** @defaultValue 0.99 */
  goodTarget?: number;
}

export function maxGoodLoad(evaluate: (scale: number) => SimulationResult | undefined, options: MaxGoodLoadOptions): number {
  const target = options.goodTarget ?? 0.99;
  const good = (scale: number): boolean => {
    const result = evaluate(scale);
    return result !== undefined && 1 - result.badRate >= target;
  };
  if (good(options.highScale)) return options.highScale;
  let [low, high] = [0, options.highScale];
  for (let step = 0; step < (options.steps ?? 10); step++) {
    const middle = (low + high) / 2;
    if (good(middle)) low = middle;
    else high = middle;
  }
  return low;
}
