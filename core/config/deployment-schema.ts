import { z } from 'zod';
import { idSchema as id } from './schema.js';

/* The deployment file (`configs/demo.yaml`): its sources, bus, sink, roles and HTTP API. */

/**
 * The lowest sampling rate a source may ask for, frames per second: one frame every 100 s.
 * Rates near zero make ffmpeg's `fps` filter give no frame at all, and a replay that "succeeds"
 * with nothing is worse than a refusal.
 */
export const MIN_FPS = 0.01;

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
    /** Replay speed: 1 is real time, N is N times faster (at least 0.01), `max` is as fast as it decodes. */
    speed: z.union([z.number().min(0.01), z.literal('max')]).default('max'),
    loop: z.boolean().default(false),
    /**
     * When a file's footage was recorded (ISO 8601, e.g. 2026-05-01T08:00:00Z): rows' frame_time
     * is this + the frame's time in the file. Default: the container's creation time where it
     * has one, else the time the replay plays the frame.
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
const flushMsSchema = z.number().int().positive().max(3_600_000).default(1000);
/**
 * Days rows are kept, counted from each row's own time (frame_time, a drop's or a stat's time);
 * absent keeps them forever. Changing it changes existing tables at the next start.
 */
const retentionDaysSchema = z.number().int().positive().max(36_500).optional();

/** Partitions per topic; a source's frames stay in order on one partition. */
const partitionsSchema = z.number().int().positive().max(1024).default(4);

export const deploymentSchema = z.strictObject({
  /** Folder for data (ClickHouse files, generated footage); `--data-dir` overrides. */
  dataDir: z.string().min(1).default('./data'),
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
      /** Re-plan this often, s. Unset: the scheduler's default (scheduler/epoch.ts, 30). */
      epochS: z.number().positive().optional(),
      /** No two plans closer than this, s. Unset: the scheduler's default (10). */
      minEpochS: z.number().positive().optional(),
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
          /** Hosts URLs may name, and only those; empty: any host but this machine itself and link-local addresses (cloud metadata). */
          hosts: z.array(z.string().min(1)).default([]),
          /** Most sources running at once (the file's included) for a POST to start one more. */
          maxRunning: z.number().int().positive().max(10_000).default(64),
        })
        .default({ schemes: ['rtsp', 'rtmp', 'http', 'https'], directories: ['.'], hosts: [], maxRunning: 64 }),
    })
    .default({ allowedHosts: [], sources: { schemes: ['rtsp', 'rtmp', 'http', 'https'], directories: ['.'], hosts: [], maxRunning: 64 } }),
  backend: z
    .strictObject({
      /** Frames per model run, for every model. Unset: per model, the fastest batch in this machine's profile (cli/batch-sizes.ts), else 4. */
      batch: z.number().int().positive().max(64).optional(),
      /**
       * Model-runtime worker threads: batches that run at once, each on the cores divided among
       * them. Unset: 2 where the machine has 2 cores or more (on a CPU two runs of a core each
       * do more than one run on both: docs/performance.md), else 1, and 1 where a node's learned
       * cache looks up asynchronously (its lookups need a core of their own; cli/run-setup.ts). `panoptes profile` measures
       * one of them, so the profiles' ℓ(b) is a thread's; a plan counts one per backend.
       */
      threads: z.number().int().positive().max(64).optional(),
      /** Threads onnxruntime uses inside one run. Unset: the cores divided among `threads`. */
      intraOpThreads: z.number().int().positive().max(256).optional(),
      /** onnxruntime's threads spin between runs instead of sleeping (steadier latency on cores of their own). */
      spinning: z.boolean().default(false),
      /** Pictures of events (line crossings, dwells, changes): the frame with the object's box drawn, kept in `<dataDir>/snapshots` as long as the rows. */
      snapshots: z.boolean().default(true),
      /**
       * How a session's batch is formed when its turn comes: `sliding-window` (Nexus's early
       * drop) or `on-time` (Our-Tardy, edge scheduling: batches chosen for the fewest late
       * requests, the hopeless dropped at once). docs/scheduler.md compares them.
       */
      batching: z.enum(['sliding-window', 'on-time']).default('sliding-window'),
      /**
       * With `on-time` batching: models cut into this many stages (the paper's layer groups), run
       * stage by stage so that requests arriving later catch up with earlier ones and batch where
       * they meet. 1 runs models whole. Nodes with a `cache:` cannot run in stages.
       */
      stages: z.number().int().min(1).max(16).default(1),
      /**
       * Delay-tolerant batches (replays faster than real time) sized or held so that they leave
       * the device before the next real-time batch must start (DeepQuery's plan-ahead). Off: they
       * run at the target batch whenever no real-time request waits.
       */
      planAhead: z.boolean().default(true),
    })
    .default({ spinning: false, snapshots: true, batching: 'sliding-window', stages: 1, planAhead: true }),
  ingest: z
    .strictObject({
      /**
       * Collaborative processing (binary offloading, edge scheduling): when the backends are
       * predicted to miss a frame's deadline (network plus their reported time, or a reported bad
       * rate) and running here is faster, the ingest worker runs the apps' first model itself
       * with `model` and sends its detections with the frame.
       */
      localAnalysis: z
        .strictObject({
          /** A detector from the zoo, usually cheaper than the one it replaces. */
          model: z.string().min(1),
          /** The first-node model it stands in for. Default: `model`. */
          replaces: z.string().min(1).optional(),
          /** Congested: a backend session of `replaces` reports more than this share of dropped or late requests. */
          maxBadRate: z.number().min(0).max(1).default(0.05),
          /** How long one backend report counts (its congestion and its time), s. */
          holdS: z.number().positive().default(5),
        })
        .optional(),
    })
    .default({}),
});
export type DeploymentInput = z.input<typeof deploymentSchema>;
export type Deployment = z.infer<typeof deploymentSchema>;
