import { z } from 'zod';

/**
 * The configuration users write, as zod schemas. One schema per file kind:
 * deployments (`configs/demo.yaml`), apps (`configs/apps/*.yaml`) and the model zoo
 * (`configs/models.yaml`). Objects are strict: an unknown key is an error, not a silent no-op.
 * Durations and sizes carry their unit in the key (`sloMs`, `maxBytes`).
 */

/**
 * The lowest sampling rate a source may ask for, frames per second: one frame every 100 s.
 * Rates near zero make ffmpeg's `fps` filter give no frame at all, and a replay that "succeeds"
 * with nothing is worse than a refusal.
 */
export const MIN_FPS = 0.01;

const id = z.string().regex(/^[a-z0-9][a-z0-9._-]*$/, 'a lower-case id (letters, digits, ".", "_", "-")');

// ---- model zoo ----

export const modelSpecSchema = z.strictObject({
  name: id,
  /** What the model does; decides which pre/post-processing runs around it. */
  task: z.enum(['detect-objects', 'detect-text', 'recognize-text', 'recognize-attributes']),
  /** Architecture, e.g. `centernet`, `ppocr-det`; picks the exact decoding. */
  architecture: z.string().min(1),
  /** Path of the ONNX file: relative to the project root, or `npm:<package>/<path>` for a model shipped in a package. */
  file: z.string().min(1),
  /** Square input side for detectors, in pixels. */
  inputSize: z.number().int().positive().optional(),
  /** Label set for detectors, e.g. `coco`. */
  labels: z.string().optional(),
  /** Character list for text recognizers, same path rules as `file`. */
  charset: z.string().optional(),
  /** Largest batch to run at once. */
  maxBatch: z.number().int().positive().default(8),
  license: z.string().min(1),
  description: z.string().default(''),
});
export type ModelSpec = z.infer<typeof modelSpecSchema>;

export const modelZooSchema = z.strictObject({
  models: z.array(modelSpecSchema).min(1),
});
export type ModelZoo = z.infer<typeof modelZooSchema>;

// ---- apps ----

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
  nodes: z.array(appNodeSchema).min(1),
  edges: z.array(appEdgeSchema).min(1),
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

// ---- deployments ----

/**
 * Which decoded frames a source keeps, besides (or instead of) a fixed `fps`: every Nth frame,
 * keyframes only (the decoder skips the rest, the cheapest), or frames whose scene-change score
 * (ffmpeg's `scene`, 0..1) exceeds a threshold, the first frame always.
 */
export const samplePolicySchema = z.union([
  z.strictObject({ everyNth: z.number().int().min(2).max(10_000) }),
  z.strictObject({ keyframes: z.literal(true) }),
  z.strictObject({ sceneChange: z.number().gt(0).lt(1) }),
]);
export type SamplePolicy = z.infer<typeof samplePolicySchema>;

export const sourceSchema = z
  .strictObject({
    id,
    /** A video file to replay. Relative paths are relative to the deployment file. */
    path: z.string().min(1).optional(),
    /** Or synthetic footage from an ffmpeg lavfi graph, generated once into the data directory. */
    synthetic: z
      .strictObject({
        lavfi: z.string().min(1),
        durationS: z.number().positive().max(3600),
      })
      .optional(),
    /** Or a Twitch channel, watched live: offline is a state, ad breaks are skipped. */
    twitch: z
      .strictObject({
        channel: z.string().regex(/^[a-zA-Z0-9_]{1,25}$/, 'a Twitch login: letters, digits, _'),
        /** `best`, `worst`, or a height such as `720p`; the nearest lower variant when absent. */
        quality: z.string().regex(/^(best|worst|\d{3,4}p?)$/, 'best, worst or a height such as 720p').default('best'),
        /** Twitch client id; PANOPTES_TWITCH_CLIENT_ID overrides; default: the web player's. Never logged. */
        clientId: z.string().min(1).optional(),
        /** A user's OAuth token (ad-free for subscribers); PANOPTES_TWITCH_OAUTH_TOKEN overrides. Never logged. */
        oauthToken: z.string().min(1).optional(),
        /** Twitch's endpoints, for tests and proxies. */
        gqlUrl: z.url().optional(),
        usherUrl: z.url().optional(),
      })
      .optional(),
    /** Apps that analyze this source, besides those whose `sources` name it; one at least in all. */
    apps: z.array(id).default([]),
    /**
     * Sampled frames per second; the file's own rate when absent. Above the source's own rate
     * it is capped to that rate (with a warning); below {@link MIN_FPS} it is refused.
     */
    fps: z.number().min(MIN_FPS, `at least ${MIN_FPS} (one frame every ${1 / MIN_FPS} s): a lower rate samples no frame from most clips`).max(120).optional(),
    /** Or sample by frame count, keyframes or scene changes (one policy; not with `fps`). */
    sample: samplePolicySchema.optional(),
    /**
     * A live stream (camera, broadcast): read as it comes, reconnected when lost, stamped with
     * the wall clock; `speed`, `loop` and `startTime` do not apply. Default: true for rtsp,
     * rtmp, udp, srt and tcp URLs; set it for an HTTP camera.
     */
    live: z.boolean().optional(),
    /**
     * The camera pushes its stream to `path` (an rtsp:// or rtmp:// address of this host) and
     * Panoptes listens there, instead of pulling it. Implies `live`.
     */
    listen: z.boolean().optional(),
    /** RTSP over `tcp` (the default) or `udp`, for cameras that only speak UDP. */
    rtspTransport: z.enum(['tcp', 'udp']).optional(),
    /** Scale to this width at decode time, keeping the aspect ratio. */
    width: z.number().int().min(16).max(7680).optional(),
    /** Replay speed: 1 is real time, N is N times faster, `max` is as fast as it decodes. */
    speed: z.union([z.number().positive(), z.literal('max')]).default('max'),
    loop: z.boolean().default(false),
    /**
     * When a file's footage was recorded (ISO 8601, e.g. 2026-05-01T08:00:00Z): rows' frame_time
     * is this + the frame's time in the file. Default: the file's modification time.
     */
    startTime: z.iso.datetime({ offset: true }).optional(),
    /** Skip this source with a warning when its file is missing, instead of failing. */
    optional: z.boolean().default(false),
  })
  .refine((s) => [s.path, s.synthetic, s.twitch].filter((x) => x !== undefined).length === 1, {
    message: 'a source needs exactly one of `path`, `synthetic` or `twitch`',
  })
  .refine((s) => !s.listen || /^(rtsp|rtmp):\/\//i.test(s.path ?? ''), {
    message: '`listen` needs a path of the form rtsp://<address>:<port>/<name> or rtmp://<address>:<port>/<app>/<name>',
    path: ['listen'],
  })
  .refine((s) => s.fps === undefined || s.sample === undefined, {
    message: 'a source samples by `fps` or by `sample`, not both',
    path: ['sample'],
  });
export type SourceConfig = z.infer<typeof sourceSchema>;

/** Rows per insert round (summed over tables). */
const batchRowsSchema = z.number().int().positive().default(5000);
/** Longest a row waits before its batch is inserted, ms. */
const flushMsSchema = z.number().int().positive().default(1000);
/**
 * Days rows are kept, counted from each row's own time (frame_time, a drop's or a stat's time);
 * absent keeps them forever. Changing it changes existing tables at the next start.
 */
const retentionDaysSchema = z.number().int().positive().max(36_500).optional();

/** Partitions per topic; a source's frames stay in order on one partition. */
const partitionsSchema = z.number().int().positive().max(1024).default(4);

export const deploymentSchema = z.strictObject({
  /** Folder for data (ClickHouse files, generated footage); `--data-dir` overrides. */
  dataDir: z.string().default('./data'),
  /** The model zoo manifest, relative to the deployment file. */
  models: z.string().default('models.yaml'),
  /** App definition files, relative to the deployment file. */
  apps: z.array(z.string().min(1)).min(1),
  sources: z.array(sourceSchema).min(1),
  bus: z
    .union([
      z.strictObject({
        /** The in-process bus: every role in one process. */
        kind: z.literal('memory').default('memory'),
        partitions: partitionsSchema,
        /** Unconsumed bytes held before producers wait (backpressure). */
        maxBytes: z.number().int().positive().default(256 * 1024 * 1024),
      }),
      z.strictObject({
        /** Apache Kafka: roles may run as separate processes on many machines. */
        kind: z.literal('kafka'),
        /** Bootstrap brokers, `host:port`; the PANOPTES_KAFKA_BROKERS environment variable overrides. */
        brokers: z.array(z.string().regex(/^[^\s:]+:\d+$/, 'host:port')).min(1).default(['127.0.0.1:9092']),
        partitions: partitionsSchema,
        clientId: z.string().min(1).default('panoptes'),
        /** Compression of JSON topics; frames and crops are JPEG and are never compressed again. */
        compression: z.enum(['gzip', 'none']).default('gzip'),
        /** How long topics this deployment creates keep records, ms. */
        retentionMs: z.number().int().positive().default(24 * 3600 * 1000),
      }),
    ], { error: 'kind: memory (the default) or kind: kafka, with their settings' })
    .default({ kind: 'memory', partitions: 4, maxBytes: 256 * 1024 * 1024 }),
  sink: z
    .union([
      z.strictObject({
        /** Embedded ClickHouse under <dataDir>/clickhouse. */
        kind: z.literal('chdb').default('chdb'),
        batchRows: batchRowsSchema,
        flushMs: flushMsSchema,
        retentionDays: retentionDaysSchema,
      }),
      z.strictObject({
        /** A ClickHouse server; PANOPTES_CLICKHOUSE_URL overrides `url`. */
        kind: z.literal('clickhouse'),
        url: z.url().default('http://127.0.0.1:8123'),
        /** Created when missing. */
        database: z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/, 'a database name: letters, digits, _').default('default'),
        username: z.string().optional(),
        password: z.string().optional(),
        batchRows: batchRowsSchema,
        flushMs: flushMsSchema,
        retentionDays: retentionDaysSchema,
      }),
    ], { error: 'kind: chdb (the default) or kind: clickhouse, with their settings' })
    .default({ kind: 'chdb', batchRows: 5000, flushMs: 1000 }),
  /**
   * The Nexus scheduler role: plans sessions onto backends every epoch from their stats. Absent,
   * backends consume round-robin; present, `--roles all` runs it too.
   */
  scheduler: z
    .strictObject({
      /** Batch profiles (`panoptes profile`), relative to the deployment file. */
      profiles: z.string().min(1).default('../profiles'),
      /** The device to plan for, when the profiles cover several. */
      device: z.string().min(1).optional(),
      epochS: z.number().positive().default(30),
      /** No two plans closer than this. */
      minEpochS: z.number().positive().default(10),
      /** Discretization ε of the SLO split, ms. */
      epsilonMs: z.number().positive().default(10),
      /** One device's memory; sessions on a node must fit in it. */
      deviceMemoryMB: z.number().positive().optional(),
    })
    .optional(),
  /** The HTTP API of `panoptes run --http-port`. */
  http: z
    .strictObject({
      /** The token that changes of state (adding, removing sources) need; PANOPTES_API_TOKEN overrides; default: made into <dataDir>/api-token. */
      token: z.string().min(16, 'at least 16 characters').optional(),
      /** Host names (and ports) requests may carry besides this host's addresses and localhost, e.g. behind a proxy. */
      allowedHosts: z.array(z.string().min(1)).default([]),
      /** What sources added over HTTP may read; the deployment file itself is not limited. */
      sources: z
        .strictObject({
          /** URL schemes allowed. */
          schemes: z.array(z.string().regex(/^[a-z][a-z0-9+.-]*$/, 'a URL scheme in lower case, e.g. rtsp')).default(['rtsp', 'rtmp', 'http', 'https']),
          /** Directories files may come from, relative to the working directory. */
          directories: z.array(z.string().min(1)).default(['.']),
        })
        .default({ schemes: ['rtsp', 'rtmp', 'http', 'https'], directories: ['.'] }),
    })
    .default({ allowedHosts: [], sources: { schemes: ['rtsp', 'rtmp', 'http', 'https'], directories: ['.'] } }),
  backend: z
    .strictObject({
      /** Frames per model run. */
      batch: z.number().int().positive().max(64).default(4),
      /** Model-runtime worker threads. */
      threads: z.number().int().positive().max(64).default(1),
    })
    .default({ batch: 4, threads: 1 }),
  ingest: z
    .strictObject({
      /**
       * Collaborative processing: while backends report congestion, the ingest worker runs the
       * apps' first model itself with `model` and sends its detections with the frame.
       */
      localAnalysis: z
        .strictObject({
          /** A detector from the zoo, usually cheaper than the one it replaces. */
          model: z.string().min(1),
          /** The first-node model it stands in for. Default: `model`. */
          replaces: z.string().min(1).optional(),
          /** Congested: a backend session of `replaces` reports more than this share of dropped or late requests. */
          maxBadRate: z.number().min(0).max(1).default(0.05),
          /** How long one report of congestion counts, s. */
          holdS: z.number().positive().default(5),
        })
        .optional(),
    })
    .default({}),
});
export type DeploymentInput = z.input<typeof deploymentSchema>;
export type Deployment = z.infer<typeof deploymentSchema>;
