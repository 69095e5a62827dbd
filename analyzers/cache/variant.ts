/**
 * A learned cache's predictor architectures (GATI Table 3), and the paper's default six scaled
 * to a layer's size. Every family ends in a dense layer over the cache's classes; the selector
 * (one hidden layer on the predictor's class distribution) is the same for all.
 */

export type VariantSpec =
  /** Flatten → dense(h) → ReLU → dense(classes). */
  | { readonly family: 'FC'; readonly hidden: number }
  /** Average pooling with a square window and stride, to at most `features` values → dense(classes). */
  | { readonly family: 'Pool'; readonly features: number }
  /** Conv(kernel k, stride s, padding ⌊k/2⌋) to CONV_CHANNELS maps → ReLU → dense(classes). */
  | { readonly family: 'Conv'; readonly kernel: number; readonly stride: number };

/** A hidden output of one input: [channels, height, width]. */
export interface HiddenShape {
  readonly channels: number;
  readonly height: number;
  readonly width: number;
}

/** Conv variants' output maps: the paper leaves it open; 16 keeps them the smallest caches, as its Table 4's are. */
export const CONV_CHANNELS = 16;
/** The selector's hidden width: the paper says only "one hidden layer". */
export const SELECTOR_HIDDEN = 16;
/** The most features an FC variant reads: the paper's FC(1024) read 32,768 (ResNet-18's block 3). */
export const FC_MAX_INPUT = 32_768;

export function variantName(spec: VariantSpec): string {
  switch (spec.family) {
    case 'FC':
      return `FC(${spec.hidden})`;
    case 'Pool':
      return `Pool(${spec.features})`;
    case 'Conv':
      return `Conv(${spec.kernel},${spec.stride})`;
  }
}

const NAME = /^(?:FC\((\d+)\)|Pool\((\d+)\)|Conv\((\d+),(\d+)\))$/;

export function parseVariant(name: string): VariantSpec {
  const m = NAME.exec(name.replace(/\s+/g, ''));
  const positive = (value: string | undefined): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`learned-cache variant '${name}': sizes must be positive integers`);
    return n;
  };
  if (!m) throw new RangeError(`learned-cache variant '${name}' is none of FC(h), Pool(h), Conv(k,s)`);
  if (m[1]) return { family: 'FC', hidden: positive(m[1]) };
  if (m[2]) return { family: 'Pool', features: positive(m[2]) };
  return { family: 'Conv', kernel: positive(m[3]), stride: positive(m[4]) };
}

const features = (shape: HiddenShape): number => shape.channels * shape.height * shape.width;

/** The pooling window (and stride) of a Pool variant: the smallest that leaves at most `features` values. */
export function poolWindow(spec: { features: number }, shape: HiddenShape): number {
  for (let window = 1; window <= Math.max(shape.height, shape.width); window++) {
    if (shape.channels * Math.floor(shape.height / window) * Math.floor(shape.width / window) <= spec.features) return window;
  }
  throw new RangeError(`Pool(${spec.features}) cannot pool ${shape.channels}×${shape.height}×${shape.width} to so few values: ${shape.channels} channels remain`);
}

/** Conv output size with padding ⌊k/2⌋ on each side, as ONNX and TensorFlow.js compute it. */
export const convOutput = (size: number, kernel: number, stride: number): number => Math.floor((size + 2 * Math.floor(kernel / 2) - kernel) / stride) + 1;

/** The values the predictor's last dense layer reads. */
export function denseInput(spec: VariantSpec, shape: HiddenShape): number {
  switch (spec.family) {
    case 'FC':
      return spec.hidden;
    case 'Pool': {
      const window = poolWindow(spec, shape);
      return shape.channels * Math.floor(shape.height / window) * Math.floor(shape.width / window);
    }
    case 'Conv':
      return CONV_CHANNELS * convOutput(shape.height, spec.kernel, spec.stride) * convOutput(shape.width, spec.kernel, spec.stride);
  }
}

/**
 * The shape of each weight of a variant, in ONNX's layouts: dense `W` [in, out] and `b` [out]; the
 * conv's `conv/W` [out, in, k, k]. `out/*` is the predictor's last dense layer, `fc/*` FC's
 * hidden layer, `sel1/*` and `sel2/*` the selector's.
 */
export function weightShapes(spec: VariantSpec, shape: HiddenShape, classes: number): Record<string, number[]> {
  const head = {
    'out/W': [denseInput(spec, shape), classes],
    'out/b': [classes],
    'sel1/W': [classes, SELECTOR_HIDDEN],
    'sel1/b': [SELECTOR_HIDDEN],
    'sel2/W': [SELECTOR_HIDDEN, 1],
    'sel2/b': [1],
  };
  switch (spec.family) {
    case 'FC':
      return { 'fc/W': [features(shape), spec.hidden], 'fc/b': [spec.hidden], ...head };
    case 'Pool':
      return head;
    case 'Conv':
      return { 'conv/W': [CONV_CHANNELS, shape.channels, spec.kernel, spec.kernel], 'conv/b': [CONV_CHANNELS], ...head };
  }
}

/** Parameters of predictor and selector. */
export const parameterCount = (spec: VariantSpec, shape: HiddenShape, classes: number): number =>
  Object.values(weightShapes(spec, shape, classes)).reduce((n, dims) => n + dims.reduce((a, b) => a * b, 1), 0);

/**
 * The paper's six (FC(1024), FC(512), Pool(8192), Pool(4096), Conv(3,1), Conv(5,2) on ResNet-18's
 * 32,768-value block 3) scaled to this layer: Pool to a quarter and an eighth of its values, FC
 * hidden widths at 1/32 and 1/64 of them and only where it has at most 32,768 (above that an FC
 * cache is the slowest and largest on a CPU, Table 4, and GATI chose none there).
 */
export function defaultVariants(shape: HiddenShape): VariantSpec[] {
  const n = features(shape);
  const fc: VariantSpec[] = n <= FC_MAX_INPUT ? [{ family: 'FC', hidden: Math.max(16, Math.round(n / 32)) }, { family: 'FC', hidden: Math.max(8, Math.round(n / 64)) }] : [];
  const pools = [Math.floor(n / 4), Math.floor(n / 8)].filter((f) => f >= shape.channels).map((f): VariantSpec => ({ family: 'Pool', features: f }));
  return [...fc, ...pools, { family: 'Conv', kernel: 3, stride: 1 }, { family: 'Conv', kernel: 5, stride: 2 }];
}
