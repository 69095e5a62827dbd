import { squishyBinPacking, type Session } from '../squishy.js';
import { peakThroughput } from '../worst-case.js';
import { paperProfiles, type PaperModel } from './paper-profiles.js';
import { seededRandom } from './random.js';

/**
 * Planning time at scale (issue 5's goal: 1,000 sessions over about 100 GPUs in under a second):
 * squishy bin packing of 1,000 sessions drawn over the paper's models, each at an SLO of 50,
 * 100, 200 or 400 ms (SSD at 200 or 400) and a rate between 0.3% and 3% of its peak throughput:
 * small sessions that must share GPUs (the packer's most work), about 100 GPUs in the plan.
 * The median of 5 timed runs after one warm-up, on this machine.
 */
const MODELS: readonly PaperModel[] = ['lenet5', 'vgg7', 'googlenet-car', 'resnet50', 'inception4', 'vgg-face', 'ssd'];
const SESSIONS = 1000;
const RUNS = 5;

export interface PlanningFigures {
  medianMs: number;
  sessions: number;
  gpus: number;
}

export function planningTime(seed = 1): PlanningFigures {
  const random = seededRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const sessions: Session[] = Array.from({ length: SESSIONS }, (_, i) => {
    const model = pick(MODELS);
    const sloMs = model === 'ssd' ? pick([200, 400]) : pick([50, 100, 200, 400]);
    const peak = peakThroughput(paperProfiles(model), sloMs, Infinity)?.throughput ?? 0;
    return { id: `s${i}`, model, sloMs, rate: peak * (0.003 + 0.027 * random()) };
  });
  let gpus = squishyBinPacking(sessions, paperProfiles).nodes.length;
  const times = Array.from({ length: RUNS }, () => {
    const started = performance.now();
    gpus = squishyBinPacking(sessions, paperProfiles).nodes.length;
    return performance.now() - started;
  }).sort((a, b) => a - b);
  return { medianMs: times[Math.floor(RUNS / 2)] ?? NaN, sessions: SESSIONS, gpus };
}
