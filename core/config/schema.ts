import { z } from 'zod';

/**
 * The configuration users write, as zod schemas. One schema per file kind: apps
 * (`configs/apps/*.yaml`) and the model zoo (`configs/models.yaml`) here, deployments
 * (`configs/demo.yaml`) in deployment-schema.ts. Objects are strict: an unknown key is an error,
 * not a silent no-op. Durations and sizes carry their unit in the key (`sloMs`, `maxBytes`).
 */

/** Ids of models, apps, nodes and sources. */
export const idSchema = z.string().regex(/^[a-z0-9][a-z0-9._-]*$/, 'a lower-case id (letters, digits, ".", "_", "-")').max(128);
const id = idSchema;

// ---- model zoo ----

export const modelSpecSchema = z.strictObject({
  name: id,
  /** What the model does; decides which pre/post-processing runs around it. */
  task: z.enum(['detect-objects', 'detect-text', 'recognize-text', 'recognize-attributes']),
  /** Architecture, e.g. `centernet`, `ppocr-det`; picks the exact decoding. */
  architecture: z.string().min(1),
  /** Path of the ONNX file: relative to the project root, or `npm:<package>/<path>` for a model shipped in a package. */
  file: z.string().min(1),
  /** Square input side for detectors, in pixels (a 2048-px CenterNet input is already 50 MB a frame). */
  inputSize: z.number().int().positive().max(2048).optional(),
  /** Label set for detectors, e.g. `coco`. */
  labels: z.string().optional(),
  /** Character list for text recognizers, same path rules as `file`. */
  charset: z.string().optional(),
  /** Class names for classifiers, one per line (the first of comma-separated names is used), same path rules as `file`. */
  labelsFile: z.string().optional(),
  /** Largest batch to run at once (at most 1024, as large as a plan carries ℓ(b) for). */
  maxBatch: z.number().int().positive().max(1024).default(8),
  /**
   * A cheaper stand-in for another model of the zoo (MCDNN's variants): when the plan needs more
   * backends than there are, the scheduler serves that model's sessions with this one. `accuracy`
   * is its answers' agreement with the other's, 0..1, as `npm run bench -- variants` measures it.
   */
  variantOf: z.strictObject({ model: id, accuracy: z.number().min(0).max(1) }).optional(),
  license: z.string().min(1),
  description: z.string().default(''),
});
export type ModelSpec = z.infer<typeof modelSpecSchema>;

export const modelZooSchema = z.strictObject({
  models: z.array(modelSpecSchema).min(1),
});
export type ModelZoo = z.infer<typeof modelZooSchema>;

// ---- apps ----

/** An app's nodes at most: also how deep an id of one of its outputs can nest. */
export const MAX_APP_NODES = 100;

const region = z
  .strictObject({
    x1: z.number().min(0).max(1),
    y1: z.number().min(0).max(1),
    x2: z.number().min(0).max(1),
    y2: z.number().min(0).max(1),
  })
  .refine((r) => r.x1 < r.x2 && r.y1 < r.y2, 'a region with x1 < x2 and y1 < y2');

const isRegExp = (pattern: string): boolean => {
  try {
    new RegExp(pattern);
    return true;
  } catch {
    return false;
  }
};

/** Which outputs of the parent flow along an edge. Regions are fractions of the frame (0..1). */
export const edgeFilterSchema = z.strictObject({
  classes: z.array(z.string().min(1)).optional(),
  minScore: z.number().min(0).max(1).optional(),
  region: region.optional(),
});

/**
 * A value read out of a node's text (a HUD counter, a timer): the first capture group of
 * `pattern` (a regular expression) in the text the node read, left to right.
 */
export const textFieldSchema = z.strictObject({
  field: id,
  pattern: z.string().min(1).refine(isRegExp, 'a regular expression (JavaScript syntax)'),
  /** `number`; `time` for m:ss or h:mm:ss (stored as seconds); `text` as read. */
  type: z.enum(['number', 'time', 'text']).default('number'),
  /** A change counts once the new value is read on this many frames in a row (1: at once). */
  confirmFrames: z.number().int().min(1).max(100).default(1),
});

/** A point as fractions of the frame (0..1), origin top left. */
const point = z.strictObject({ x: z.number().min(0).max(1), y: z.number().min(0).max(1) });
/** Which point of a box stands for the object: where it touches the ground, or its centre (faces, top-down views). */
const anchor = z.enum(['bottom-center', 'center']);

/** Follow a node's detections from frame to frame in each source (one tracker per source). */
export const trackSchema = z.strictObject({
  /** `iou`: match to the track whose last box overlaps most; `centroid`: nearest centre (fast, small objects). */
  method: z.enum(['iou', 'centroid']).default('iou'),
  /** `iou`: least overlap for a match. */
  minIou: z.number().gt(0).max(1).default(0.3),
  /** `centroid`: farthest a centre may move between analyzed frames, as a fraction of the frame diagonal. */
  maxDistance: z.number().gt(0).max(1).default(0.1),
  /** Analyzed frames a track may go unseen before it ends. */
  maxMissedFrames: z.number().int().min(0).max(1000).default(5),
  /** A track seen on fewer analyzed frames is noise (a flicker, a person half in the door): no `track` event. */
  minFrames: z.number().int().min(1).max(1000).default(1),
  /**
   * Match a detection to a track of the same class only. Off for a detector whose class for one
   * object flickers between frames; a track's class is then the one with the most score.
   */
  sameClass: z.boolean().default(true),
  /** Track only these classes; default: all the node outputs. */
  classes: z.array(z.string().min(1)).optional(),
});

/**
 * A counting line. Follow it from `from` to `to`: a track crossing towards your left goes
 * `directions.positive`, towards your right `directions.negative`. A line drawn left to right
 * across the picture calls going up the picture `positive`.
 */
export const lineSchema = z
  .strictObject({
    name: id,
    from: point,
    to: point,
    directions: z.strictObject({ positive: id, negative: id }).default({ positive: 'positive', negative: 'negative' }),
    anchor: anchor.default('bottom-center'),
    /** How far from the line (fraction of the frame diagonal) an anchor must be for its side to count. */
    margin: z.number().min(0).max(0.5).default(0.01),
  })
  .refine((l) => l.from.x !== l.to.x || l.from.y !== l.to.y, { message: 'a line needs two different points', path: ['to'] });

/** An area of the picture: tracks' stays in it become `dwell` events. */
export const zoneSchema = z.strictObject({
  name: id,
  /** Corners in order round the zone. */
  polygon: z.array(point).min(3),
  anchor: anchor.default('bottom-center'),
  /** Shorter stays are not written (a person walking past). */
  minDwellMs: z.number().int().min(0).default(0),
});

/**
 * Sequential specialization (WEG, thesis ch. 5) of a classification node: the node's model is the
 * oracle; each template is a cheaper zoo model whose `features` output a top layer is retrained on,
 * online, for the few classes the stream shows now. Names and defaults are the thesis'.
 */
export const specializeSchema = z.strictObject({
  /** Zoo models with a `features` output (e.g. `efficientnet-lite0`), cheapest first: the templates h_k. */
  templates: z.array(id).min(1).max(4),
  /** `faces` or `objects`: picks the thesis' training skew (50% or 60% of the rows from the dominant classes). */
  workload: z.enum(['faces', 'objects']).default('objects'),
  /**
   * a*: the oracle's accuracy. Its own labels train and judge the templates here, so 1; with
   * τ_a −0.05 the cascade may agree with the oracle on 5 points fewer inputs.
   */
  oracleAccuracy: z.number().gt(0).max(1).default(1),
  /** τ_a: the cascade's estimated accuracy must reach a* + τ_a. */
  accuracyMargin: z.number().min(-1).max(1).default(-0.05),
  /** w_min: inputs the dominant classes are taken from, at the least. */
  minWindow: z.number().int().min(2).max(10_000).default(30),
  /** τ_r: dominant sets differing in at most this many classes are the same. */
  sameClasses: z.number().int().min(0).max(100).default(2),
  /** ε: the share of the specialized model's answers the oracle checks (τ_FP is judged by them). */
  epsilon: z.number().gt(0).lt(1).default(0.01),
  /** τ_FP: the specialized phase ends when more of its answers than this disagree with the oracle. */
  maxDisagreement: z.number().gt(0).max(1).default(0.5),
  /** Training skew; default by `workload`. */
  trainingSkew: z.number().gt(0).lt(1).optional(),
  /**
   * Oracle-labelled inputs of a class the stream's pool keeps (a random sample of those seen), per
   * template. A class is specialized on once it has 10 (half to train on, half to test).
   */
  poolRowsPerClass: z.number().int().min(10).max(200).default(20),
  /** Classes the stream's pool keeps rows of, those seen most recently: a new class lets the one seen longest ago go. */
  poolClasses: z.number().int().min(2).max(1_000).default(64),
});

/**
 * A learned cache on a detector node (GATI, fitted to a detector; docs/learned-caches.md): frames
 * whose early feature map changed too little since their stream's last frame the model ran on
 * get that frame's objects, and skip the rest of the model. Learned online from the node's streams.
 */
export const cacheSchema = z.strictObject({
  /** The candidate layer read, as an index into the model's block outputs (docs/learned-caches.md lists CenterNet's). */
  layer: z.number().int().min(0).max(100).default(4),
  /** Cells per channel of the selector's grid over the feature map. */
  grid: z.number().int().min(1).max(4096).default(64),
  /** Share of hits whose answer must be right, on held-out pairs: the accuracy filter. */
  accuracyTarget: z.number().gt(0).max(1).default(0.97),
  /** Share of hits run through the whole model anyway, to check the cache as it serves. */
  verifyRate: z.number().min(0).max(1).default(0.1),
  /** Frames one run of the model may answer for, at most. */
  maxAge: z.number().int().min(1).max(10_000).default(25),
  /** Earlier frames each frame the model runs on is paired with, to learn from. */
  pairsPerFrame: z.number().int().min(1).max(16).default(3),
  /** Labelled pairs kept, from all the node's streams: the sliding window. */
  window: z.number().int().min(20).max(100_000).default(600),
  /** New pairs between retrainings. */
  period: z.number().int().min(1).max(100_000).default(100),
  /** Pairs, and of each label a tenth as many, before the first training. */
  minPairs: z.number().int().min(10).max(100_000).default(60),
  /** w_FP: a wrong hit's weight in the selector's loss against a missed one's. */
  falsePositiveWeight: z.number().positive().max(1000).default(4),
  /**
   * Start from a selector learned on other footage, shipped beside the model for its default layer
   * and grid (`models/centernet.frame-cache-prior.json`), instead of from nothing.
   */
  prior: z.boolean().default(true),
});

/**
 * A learned cache on an image classifier or face attribute node (GATI; docs/learned-caches.md): its first requests
 * are recorded, variants are explored on them and the best set under the accuracy filter and the
 * memory budget is enabled; a request whose lookup hits is answered at that layer. The enabled
 * variants are retrained on a sample of the requests. Learned online from all the node's streams.
 */
export const classifierCacheSchema = z.strictObject({
  /** Candidate layers explored, as indices into the model's block outputs; several evenly spread when absent. */
  layers: z.array(z.number().int().min(0).max(100)).min(1).max(8).optional(),
  /**
   * Requests recorded before exploration (their hidden outputs are kept until it ends, within
   * 512 MB: fewer are recorded where the layers' outputs are larger). A fifth measure each variant.
   */
  explore: z.number().int().min(50).max(5_000).default(300),
  /** The cache's classes: the model's commonest answers, this many; the rest are "other", which never answers. */
  maxClasses: z.number().int().min(1).max(100).default(16),
  /** Variants larger than this (parameters) are not explored: they take minutes to train on a CPU. */
  maxParameters: z.number().int().min(1_000).max(5_000_000).default(1_000_000),
  /** The memory budget of the enabled variants. */
  memoryMB: z.number().positive().max(10_000).default(64),
  /** Share of hits whose answer must be the model's, on held-out requests: the accuracy filter. */
  accuracyTarget: z.number().gt(0).max(1).default(0.97),
  /** w_FP: a wrong hit's weight in the selector's loss against a missed one's. */
  falsePositiveWeight: z.number().positive().max(1000).default(4),
  /** Of each `group` requests, `sampled` are labelled by a run of the whole model into the window. */
  group: z.number().int().min(1).max(100_000).default(100),
  sampled: z.number().int().min(0).max(100_000).default(20),
  /** Labelled requests kept: the sliding window. */
  window: z.number().int().min(20).max(100_000).default(300),
  /** Requests between retrainings. */
  period: z.number().int().min(1).max(1_000_000).default(200),
  /**
   * Requests the model runs whole before the caches are explored again, where exploration
   * enabled none or every enabled one stopped meeting the accuracy filter; doubled each time
   * exploration enables none. 0: never explored again.
   */
  reexplore: z.number().int().min(0).max(100_000_000).default(3_000),
  /**
   * `async`: lookups run on a model thread of their own (one core) beside the model, which goes
   * on meanwhile, as GATI serves them: a miss does not wait for them. It pays where a core is
   * free of the model's threads (`backend.intraOpThreads` below the cores). `sync`: the model
   * waits for each lookup, on its own threads.
   */
  lookups: z.enum(['sync', 'async']).default('sync'),
}).refine((c) => c.sampled <= c.group, { message: 'sampled must be at most group (requests sampled of each group)', path: ['sampled'] });

/**
 * A node's `cache:` as the app file gives it: a detector's keys or a classifier's, none filled in
 * here. The node's model decides which schema applies (`cacheSchemaFor`), and its runner fills in
 * the defaults.
 */
export type NodeCacheConfig = Partial<z.input<typeof cacheSchema> & z.input<typeof classifierCacheSchema>>;
export const nodeCacheSchema = z.strictObject(
  Object.fromEntries(Object.entries({ ...cacheSchema.shape, ...classifierCacheSchema.shape }).map(([key, schema]) => [key, (schema instanceof z.ZodDefault ? schema.unwrap() : schema).optional()])),
) as unknown as z.ZodType<NodeCacheConfig>;

/** The schema of a `cache:` on a node running a model of `architecture`, where apps may have one. */
export function cacheSchemaFor(architecture: string | undefined): typeof cacheSchema | typeof classifierCacheSchema | undefined {
  if (architecture === 'centernet') return cacheSchema;
  if (architecture === 'efficientnet-lite' || architecture === 'faceres') return classifierCacheSchema;
  return undefined;
}

export const appNodeSchema = z.strictObject({
  id,
  model: id,
  /** Model parameters, e.g. `minScore`, `classes` for a detector. */
  params: z.record(z.string(), z.unknown()).default({}),
  /** Run on this part of the node's input only (fractions of it), e.g. a HUD's corner of the frame. */
  region: region.optional(),
  /** Values to read out of the text this node recognizes; a change of value is an event. */
  parse: textFieldSchema.optional(),
  /** Track this detector's objects: `track` events with each object's time in view, and ids on its rows. */
  track: trackSchema.optional(),
  /** Count tracked objects crossing lines: `line_crossing` events, by direction. Needs `track`. */
  lines: z.array(lineSchema).default([]),
  /** Time tracked objects spend in zones: `dwell` events. Needs `track`. */
  zones: z.array(zoneSchema).default([]),
  /** Specialize this classifier online for the classes each stream shows now. */
  specialize: specializeSchema.optional(),
  /** Answer requests early from a learned cache: `cache: {}` for the defaults. Detector (centernet), image classifier (efficientnet-lite) and face attribute (faceres) nodes. */
  cache: nodeCacheSchema.optional(),
});

export const appEdgeSchema = z.strictObject({
  /** `frames` for the root, else a node id. */
  from: z.string().min(1),
  to: id,
  filter: edgeFilterSchema.default({}),
  /** Extra context around a crop, as a fraction of the box's size. */
  cropPadding: z.number().min(0).max(1).default(0),
});

export const appSpecSchema = z.strictObject({
  name: id,
  description: z.string().default(''),
  /**
   * Deployment sources this app analyzes, by id or by a pattern where `*` stands for any run of
   * characters (`cam-*`), besides the sources that list the app in their own `apps`.
   */
  sources: z.array(z.string().regex(/^[a-z0-9*._-]+$/, 'a source id, or a pattern with * (e.g. cam-*)')).default([]),
  /** End-to-end latency SLO from capture to result, ms. */
  sloMs: z.number().int().positive(),
  nodes: z.array(appNodeSchema).min(1).max(MAX_APP_NODES),
  edges: z.array(appEdgeSchema).min(1).max(1000),
  /** Saved SQL queries users run by name: `panoptes query --saved <app>.<name>`. */
  queries: z.record(id, z.string().min(1)).default({}),
});
export type AppSpec = z.infer<typeof appSpecSchema>;
export type AppNode = z.infer<typeof appNodeSchema>;
export type AppEdge = z.infer<typeof appEdgeSchema>;
export type EdgeFilter = z.infer<typeof edgeFilterSchema>;
export type TextField = z.infer<typeof textFieldSchema>;
export type TrackConfig = z.infer<typeof trackSchema>;
export type LineSpec = z.infer<typeof lineSchema>;
export type ZoneSpec = z.infer<typeof zoneSchema>;
export type SpecializeConfig = z.infer<typeof specializeSchema>;
export type CacheConfig = z.infer<typeof cacheSchema>;
export type ClassifierCacheConfig = z.infer<typeof classifierCacheSchema>;
