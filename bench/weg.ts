// `npm run bench -- weg [--minutes M] [--workload faces|objects]`: specialization (WEG, thesis
// ch. 5) on real models and the shared footage, against the oracle alone on the same inputs in
// the same run. Workloads: faces (weg-faces.ts) and objects (weg-objects.ts).
//
// Each workload's crops are split in time into two halves: one the templates' heads train on,
// one traces are drawn from. For each template, its behaviour once specialized (Eq. 5.1's a_in,
// e_in→out, a_out) is measured as the thesis does: heads for 10 random dominant sets per n,
// trained on one half and tested on the other. The footage is far shorter than the thesis'
// 5-minute segments, so traces are built its way (§5.4): n dominant classes at skew p, drawn from
// the held-out half, one input every 1/6 s; and a uniformly random trace.
//
// Input by input, the oracle runs alone (its label is the reference), then WEG: both are timed
// on the machine as it is at that moment. Retraining is waited for (`awaitTraining`) and the
// head starts serving at the stream time the training took, so the figures do not depend on how
// busy the machine is.
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  behaviourByDominant,
  createHeadTrainer,
  createOnnxRuntime,
  createSpecializer,
  measureBehaviour,
  sample,
  type FeatureExtractor,
  type HeadTrainer,
  type ModelRuntime,
  type RgbImage,
  type SpecializerTemplate,
} from '../analyzers/index.js';
import { loadModelZoo, seededRandom } from '../core/index.js';
import { footage, logger, poolOf, type Crop } from './weg-crops.js';
import { facesWorkload } from './weg-faces.js';
import { objectsWorkload } from './weg-objects.js';

const INPUT_INTERVAL_MS = 1000 / 6;
const SEED = 7;
/** n at which each template's behaviour is measured (those above the classes there are are left out). */
const GRID = [1, 2, 5, 10, 15, 20];
/** A class is in traces (and D) only with at least this many crops in each half. */
const MIN_CROPS = 5;

export interface Workload {
  name: string;
  /** Labelled by the oracle. */
  crops: readonly Crop[];
  oracle: (images: readonly RgbImage[]) => Promise<string[]>;
  /** Cheapest first. */
  templates: readonly { name: string; extractor: FeatureExtractor }[];
  training: { skew: number; maxRows: number };
  /** The skewed trace: n dominant classes at skew p. */
  skewed: { dominant: number; skew: number };
  dispose(): Promise<void>;
}

/** The figures the issue asks for, per trace. */
interface Figures {
  name: string;
  skewed: boolean;
  oracleMs: number;
  wegMs: number;
  speedup: number;
  agreement: number;
  oracleAgreement: number;
  retrainMs: number;
  specialRate: number;
  cascadeRate: number;
  transitions: number;
  meanDominant: number;
  meanWindow: number;
  trainedOn: string;
}

const WORKLOADS: Record<string, (runtime: ModelRuntime, zoo: ReturnType<typeof loadModelZoo>) => Promise<Workload>> = { faces: facesWorkload, objects: objectsWorkload };

export async function wegBench(args: readonly string[]): Promise<void> {
  const unknown = args.filter((a, i) => a.startsWith('--') && !['--minutes', '--workload'].includes(a) && i % 2 === 0);
  if (unknown.length > 0) throw new Error(`weg: unknown option ${unknown[0]}; expected --minutes M, --workload faces|objects`);
  const option = (flag: string): string | undefined => (args.includes(flag) ? (args[args.indexOf(flag) + 1] ?? '') : undefined);
  const minutes = Number(option('--minutes') ?? 5);
  if (!(minutes > 0)) throw new Error(`--minutes: expected a positive number of minutes per trace, got ${option('--minutes')}`);
  const chosen = option('--workload');
  if (chosen !== undefined && !WORKLOADS[chosen]) throw new Error(`--workload: expected ${Object.keys(WORKLOADS).join(' or ')}, got ${chosen}`);
  if (!existsSync(footage)) throw new Error(`the weg benchmark needs ${footage} (../shared/footage beside the project)`);
  const zoo = loadModelZoo();
  const runtime = createOnnxRuntime({ logger });
  const trainer = createHeadTrainer();
  const headDir = mkdtempSync(join(tmpdir(), 'panoptes-weg-'));
  const figures: Figures[] = [];
  try {
    for (const [name, load] of Object.entries(WORKLOADS)) {
      if (chosen !== undefined && name !== chosen) continue;
      const workload = await load(runtime, zoo);
      try {
        figures.push(...(await runWorkload(workload, { runtime, trainer, headDir, minutes })));
      } finally {
        await workload.dispose();
        for (const t of workload.templates) await t.extractor.dispose();
      }
    }
    console.log(JSON.stringify({ workloads: figures }));
  } finally {
    await trainer.close();
    await runtime.close();
    rmSync(headDir, { recursive: true, force: true });
  }
}

async function runWorkload(workload: Workload, context: { runtime: ModelRuntime; trainer: HeadTrainer; headDir: string; minutes: number }): Promise<Figures[]> {
  const { name, crops, training } = workload;
  const [trainCrops, testCrops] = [crops.filter((c) => !c.test), crops.filter((c) => c.test)];
  const count = (list: readonly Crop[]) => list.reduce((m, c) => m.set(c.label, (m.get(c.label) ?? 0) + 1), new Map<string, number>());
  const [all, inTrain, inTest] = [count(crops), count(trainCrops), count(testCrops)];
  const top = [...all].sort((a, b) => b[1] - a[1]).slice(0, 12);
  console.log(`${name}: ${crops.length} crops (${trainCrops.length} to train on, ${testCrops.length} held out), ${all.size} classes; most frequent: ${top.map(([l, n]) => `${l} ${n}`).join(', ')}`);

  const random = seededRandom(SEED);
  const templates: SpecializerTemplate<RgbImage>[] = [];
  for (const { name: template, extractor } of workload.templates) {
    const [train, test] = [await poolOf(extractor, trainCrops), await poolOf(extractor, testCrops)];
    const grid = await measureBehaviour(train, test, { ...training, dominantCounts: GRID, minRows: MIN_CROPS, random, train: (job) => context.trainer.train(job) });
    if (grid.length === 0) throw new Error(`${name}: fewer than 2 classes have ${MIN_CROPS} crops in each half; nothing to specialize on`);
    console.log(`  ${template} specialized to n classes (10 random dominant sets per n, trained on one half, tested on the other):`);
    for (const g of grid) console.log(`    n=${g.dominant}: a_in ${g.aIn.toFixed(3)}, e_in→out ${g.eInOut.toFixed(3)}, a_out ${g.aOut.toFixed(3)}, retrain ${g.trainMs.toFixed(0)} ms`);
    templates.push({ name: template, behaviour: behaviourByDominant(grid), pool: train, features: (images) => extractor.features(images) });
  }

  const byClass = new Map<string, RgbImage[]>();
  for (const c of testCrops) {
    if ((inTrain.get(c.label) ?? 0) >= MIN_CROPS && (inTest.get(c.label) ?? 0) >= MIN_CROPS) byClass.set(c.label, [...(byClass.get(c.label) ?? []), c.image]);
  }
  const length = Math.round((context.minutes * 60_000) / INPUT_INTERVAL_MS);
  const { skew } = workload.skewed;
  // The skewed trace needs classes outside D too.
  const dominant = Math.min(workload.skewed.dominant, byClass.size - 1);
  if (dominant < 1) throw new Error(`${name}: fewer than 2 classes have ${MIN_CROPS} crops in each half; nothing to specialize on`);
  console.log(`  traces: ${length} inputs each, one every ${INPUT_INTERVAL_MS.toFixed(0)} ms of stream time, from the ${byClass.size} classes with ${MIN_CROPS} crops or more in each half`);
  const traces = [
    { name: `${name} (${dominant}, ${skew})`, skewed: true, inputs: trace(byClass, dominant, skew, length, random) },
    { name: `${name} random`, skewed: false, inputs: trace(byClass, 0, 0, length, random) },
  ];

  const figures: Figures[] = [];
  for (const t of traces) {
    const specializer = createSpecializer<RgbImage>({
      name,
      oracle: workload.oracle,
      // The oracle's own labels are the truth here (a* = 1): the cascade may fall at most 5 points below them.
      weg: { oracleAccuracy: 1, accuracyMargin: -0.05 },
      templates,
      training,
      train: (job) => context.trainer.train(job),
      runtime: context.runtime,
      headDir: context.headDir,
      random: seededRandom(SEED),
      awaitTraining: true,
      relativeCost: 'measured',
    });
    let [oracleMs, wegMs, agree] = [0, 0, 0];
    for (const [i, input] of t.inputs.entries()) {
      const started = performance.now();
      const [reference] = await workload.oracle([input]);
      oracleMs += performance.now() - started;
      const result = await specializer.classify(input, i * INPUT_INTERVAL_MS);
      wegMs += result.modelMs;
      if (result.label === reference) agree += 1;
    }
    const s = specializer.status();
    await specializer.close();
    const n = t.inputs.length;
    const f: Figures = {
      name: t.name,
      skewed: t.skewed,
      oracleMs: round(oracleMs / n, 2),
      wegMs: round(wegMs / n, 2),
      speedup: round(oracleMs / wegMs, 2),
      agreement: round(agree / n, 3),
      oracleAgreement: 1,
      retrainMs: s.retrains === 0 ? 0 : round(s.retrainMs / s.retrains, 0),
      specialRate: round(s.specialized / s.inputs, 3),
      cascadeRate: s.specialized === 0 ? 0 : round(s.fellThrough / s.specialized, 3),
      transitions: s.transitions,
      meanDominant: s.transitions === 0 ? 0 : round(s.dominantSum / s.transitions, 1),
      meanWindow: s.transitions === 0 ? 0 : round(s.windowSum / s.transitions, 1),
      trainedOn: s.trainedOn ?? 'none',
    };
    console.log(
      `  ${t.name}: oracle ${f.oracleMs} ms, WEG ${f.wegMs} ms per classification (${f.speedup}x), agreement ${f.agreement}; ` +
        `special rate ${f.specialRate}, cascade rate ${f.cascadeRate}, ${f.transitions} transitions, |D| ${f.meanDominant}, w ${f.meanWindow}, retrain ${f.retrainMs} ms (${f.trainedOn})` +
        (s.trainingError ? `; a retraining failed: ${s.trainingError}` : ''),
    );
    figures.push(f);
  }
  return figures;
}

/** Thesis §5.4: each input from the dominant classes with probability `skew` (else from another class), then a random crop of that class; `dominant` 0 is uniformly random. */
function trace(byClass: ReadonlyMap<string, RgbImage[]>, dominant: number, skew: number, length: number, random: () => number): RgbImage[] {
  const classes = [...byClass.keys()].sort();
  const pick = (from: readonly string[]): RgbImage => {
    const crops = byClass.get(from[Math.floor(random() * from.length)]!)!;
    return crops[Math.floor(random() * crops.length)]!;
  };
  const d = sample(classes, dominant, random);
  const others = classes.filter((c) => !d.includes(c));
  return Array.from({ length }, () => (d.length > 0 && random() < skew ? pick(d) : pick(d.length > 0 ? others : classes)));
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));
