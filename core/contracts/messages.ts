import { z } from 'zod';
import { isBackfillTopic, taskTopicModel, Topics } from './topics.js';
import { defineContract, defineJsonContract } from './codec.js';

/**
 * The messages stages exchange on the bus (DESIGN.md §5). Each has a version; a change that
 * old readers can't ignore bumps it, and the decoder keeps an upgrade for the old one.
 * Recorded encodings of every version live in test/fixtures/contracts and must keep decoding.
 */

const ms = z.number().finite();
const count = z.number().int().nonnegative();
/**
 * Bounds the shipped stages never reach, on what anyone who can write to a topic can send: an
 * id, a list, a rate. Each keeps one message from costing a stage without bound.
 */
const name = z.string().min(1).max(1024);
/** Requests or frames per second one backend reports: far above what one can take in. */
const rate = z.number().nonnegative().max(1e5);

// ---- Frame: a sampled video frame on `panoptes.frames` (key = source id) ----

const frameHeader = z.object({
  /** Source id from the deployment config. */
  source: z.string().min(1),
  /** Index of the sampled frame within its source, from 0. */
  seq: count,
  /** When the frame entered the pipeline, ms since epoch: deadlines count from it. */
  captureTimeMs: ms,
  /**
   * When the scene was recorded, ms since epoch, for rows' `frame_time`: for a replayed file its
   * start time (the source's `startTime`, else the container's creation time) + pts, the same on
   * every replay; absent where that is the capture time (live sources, files that do not say).
   */
  mediaTimeMs: ms.optional(),
  /** Presentation time within the stream, ms. */
  ptsMs: ms,
  width: count,
  height: count,
  /**
   * The apps that analyze this frame, as its ingest worker was configured: a source added while
   * running is known to backends elsewhere only through this. Absent, backends use their own
   * deployment's sources.
   */
  apps: z.array(name).max(256).optional(),
  /**
   * Collaborative processing: detections the ingest worker made itself, with `model`, for an
   * app's first node, while the backends were congested. A backend uses them instead of
   * running that node.
   */
  local: z
    .array(
      z.object({
        app: z.string().min(1),
        node: z.string().min(1),
        model: z.string().min(1),
        /** At most what a detector's `maxDetections` allows: each becomes a crop, a track, a row. */
        detections: z
          .array(
            z.object({
              box: z.object({ x1: z.number(), y1: z.number(), x2: z.number(), y2: z.number() }),
              classId: z.number().int(),
              className: name,
              score: z.number(),
            }),
          )
          .max(1000),
      }),
    )
    .max(256)
    .optional(),
});
export type Frame = z.infer<typeof frameHeader> & { jpeg: Uint8Array };

export const frameContract = defineContract<Frame, z.infer<typeof frameHeader>>({
  kind: 'frame',
  version: 1,
  header: frameHeader,
  split: ({ jpeg, ...header }) => ({ header, blob: jpeg }),
  join: (header, blob) => ({ ...header, jpeg: blob }),
});

// ---- Task: work for a DAG node below the root (a crop for the next model) ----

const taskHeader = z.object({
  app: z.string().min(1),
  /** The DAG node that should run on this task. */
  node: z.string().min(1),
  source: z.string().min(1),
  frameSeq: count,
  captureTimeMs: ms,
  /** The frame's `mediaTimeMs`. */
  mediaTimeMs: ms.optional(),
  /** When the node must be done with it: capture time + the stage budgets from the root down to and including this node. */
  deadlineMs: ms,
  /** This node's own stage budget (query analysis's share of the app's SLO), ms. */
  budgetMs: ms,
  /** Where the crop came from in the frame, pixels; absent when the task carries the whole frame. */
  region: z.object({ x1: z.number(), y1: z.number(), x2: z.number(), y2: z.number() }).optional(),
  /** Size of the whole frame, for filters on regions of it. */
  frameWidth: count.optional(),
  frameHeight: count.optional(),
  /** Row ids of the results this task descends from, root first. */
  lineage: z.array(z.string().min(1).max(16_384)).max(128),
  /**
   * Set on the in-process bus, where a crop travels as the pixels it was cut from the decoded
   * frame (never encoded): `jpeg` then holds raw RGB of this size. Absent: `jpeg` is a JPEG.
   */
  pixels: z.object({ width: z.number().int().positive(), height: z.number().int().positive() }).optional(),
});
export type Task = z.infer<typeof taskHeader> & { jpeg: Uint8Array };

export const taskContract = defineContract<Task, z.infer<typeof taskHeader>>({
  kind: 'task',
  version: 1,
  header: taskHeader,
  split: ({ jpeg, ...header }) => ({ header, blob: jpeg }),
  join: (header, blob) => ({ ...header, jpeg: blob }),
});

// ---- ResultRow: one row for a results table ----

const fieldValue = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const resultRow = z.object({
  app: z.string().min(1),
  table: z.string().regex(/^[a-z_][a-z0-9_]*$/, 'a lower-case SQL identifier'),
  /** Deterministic: the same input message always yields the same id, so replays are harmless. */
  rowId: z.string().min(1),
  source: z.string().min(1),
  fields: z.record(z.string(), fieldValue),
  /**
   * When this version of a row written more than once was made (ms since epoch; a visit's
   * `track` event written again when a late identity comes): the store keeps the version made
   * last, whichever arrives last (the two travel in different messages).
   */
  versionMs: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
});
export type ResultRow = z.infer<typeof resultRow>;
export type FieldValue = z.infer<typeof fieldValue>;

export const resultRowContract = defineJsonContract<ResultRow>('resultRow', 1, resultRow);

// ---- Drop: something that will not produce its rows, and why ----

const drop = z.object({
  /** What was dropped. */
  what: z.enum(['frame', 'task', 'row', 'message']),
  /** The stage that dropped it, e.g. `ingest`, `backend:centernet`, `sink`. */
  where: z.string().min(1),
  /** A stable reason code, e.g. `deadline`, `decode`, `invalid-row`. */
  why: z.string().min(1),
  source: z.string().optional(),
  frameSeq: count.optional(),
  atMs: ms,
  detail: z.string().optional(),
});
export type Drop = z.infer<typeof drop>;

export const dropContract = defineJsonContract<Drop>('drop', 1, drop);

// ---- Stats: what a backend observed during one interval ----

const stats = z.object({
  backend: z.string().min(1),
  fromMs: ms,
  toMs: ms,
  sessions: z.array(
    z.object({
      session: z.string().min(1),
      /** Requests per second that arrived. */
      arrivalRate: rate,
      queueLength: count,
      batchSizes: z.array(count),
      latencyP50Ms: ms,
      latencyP99Ms: ms,
      dropped: count,
      /** Share of requests that missed their deadline or were dropped, 0..1. */
      badRate: z.number().min(0).max(1),
    }),
  ),
  /** Measured fan-out γ per DAG edge: child tasks per parent request. */
  edges: z.array(z.object({ app: z.string(), from: z.string(), to: z.string(), gamma: z.number().nonnegative().max(1e4) })),
  /** Frames per second this backend took in for each app: the load the query analysis splits. */
  apps: z
    .array(
      z.object({
        app: z.string().min(1),
        framesRate: rate,
        /** Of those, frames from delay-tolerant sources (replays faster than real time): the scheduler plans them into idle time. */
        delayTolerantFramesRate: rate.optional(),
        /** The app's model requests that finished or were dropped in this interval, and of them those late or dropped: its SLO attainment. */
        requests: count.optional(),
        late: count.optional(),
        dropped: count.optional(),
      }),
    )
    .optional(),
  /**
   * Specialized nodes (WEG, thesis ch. 5), per stream and node: counts since this backend began
   * serving the stream, from which Table 5.4's rates and means follow.
   */
  specializations: z
    .array(
      z.object({
        app: z.string().min(1),
        node: z.string().min(1),
        source: z.string().min(1),
        phase: z.string().min(1),
        inputs: count,
        /** Inputs in the specialized phase, and those of them the specialized model passed to the oracle ("other"). */
        specialized: count,
        fellThrough: count,
        /** Entries into the specialized phase, and the sums of |D| and w over them. */
        transitions: count,
        dominantSum: count,
        windowSum: count,
        /** Inputs the oracle ran on (exploring, spot checks, fall-throughs), and inputs, in this interval: the oracle's share γ the scheduler plans for. */
        oracleCalls: count,
        intervalInputs: count,
        intervalOracleCalls: count,
        /** Runs of each template's model (cascade calls and pool rows) in this interval, by model. */
        intervalTemplateRuns: z.record(z.string(), count),
        /** Of the interval's oracle calls, those on inputs a template's cascade ran on first (fall-throughs, spot checks), by template's model. */
        intervalCascadeOracleCalls: z.record(z.string(), count).default({}),
        retrains: count,
        retrainMs: ms,
      }),
    )
    .optional(),
  /** Learned caches on detector nodes, per stream and node: counts since the backend began serving the stream. */
  caches: z
    .array(
      z.object({
        app: z.string().min(1),
        node: z.string().min(1),
        source: z.string().min(1),
        /** The candidate layer the cache reads, and its variant. */
        layer: z.string().min(1),
        variant: z.string().min(1),
        frames: count,
        hits: count,
        /** Hits run whole anyway, and those of them the cache had right: the observed accuracy. */
        checked: count,
        checkedRight: count,
        /** The selector's hit rate and accuracy on held-out pairs when last calibrated: the expected ones. */
        expectedHitRate: z.number().min(0).max(1),
        expectedAccuracy: z.number().min(0).max(1),
        retrains: count,
        retrainMs: ms,
        failedRetrains: count,
      }),
    )
    .optional(),
  /** The accelerator behind this backend: stats double as its registration with the scheduler. */
  device: z
    .object({ kind: z.string().min(1), name: z.string(), memoryMB: z.number().nonnegative(), host: z.string().min(1) })
    .optional(),
});
export type Stats = z.infer<typeof stats>;

export const statsContract = defineJsonContract<Stats>('stats', 1, stats);

// ---- Plan: the scheduler's placement for one epoch ----

const plan = z.object({
  epoch: count,
  createdAtMs: ms,
  sessions: z.array(
    z.object({
      id: z.string().min(1),
      model: z.string().min(1),
      sloMs: z.number().positive(),
      /** The app DAG nodes whose requests this session serves: `sloMs` is each one's stage budget. */
      nodes: z.array(z.object({ app: z.string().min(1), node: z.string().min(1) })).optional(),
      /** ℓ(b) of the session's profile, ms, for b = 1, 2, …: what early drop judges its batches by. Absent without a profile. */
      latencyMs: z.array(z.number().positive().max(3_600_000)).min(1).max(1024).optional(),
      /** CPU time per request around the batch (the profile's pre- and post-processing), ms. */
      overheadMs: z.number().nonnegative().max(3_600_000).optional(),
      /** Served by a cheaper variant (MCDNN): the model the nodes asked for, and the variant's accuracy against it. */
      variantOf: z.string().min(1).optional(),
      accuracy: z.number().min(0).max(1).optional(),
    }),
  ),
  backends: z.array(
    z.object({
      backend: z.string().min(1),
      dutyCycleMs: z.number().nonnegative(),
      sessions: z.array(z.object({ session: z.string().min(1), batch: z.number().int().positive() })),
    }),
  ),
  /**
   * Delay-tolerant work (DeepQuery): not packed, but run in the time the plan leaves idle; per
   * model the requests/s offered and the requests/s that idle time allows.
   */
  delayTolerant: z
    .object({
      idleDevices: z.number().nonnegative(),
      models: z.array(z.object({ model: z.string().min(1), rate: z.number().nonnegative(), capacity: z.number().nonnegative() })),
      /** Each backend's idle time (0..1): delay-tolerant frames and crops are routed in proportion, backends without a session included. */
      backends: z.record(z.string(), z.number().min(0).max(1)).optional(),
    })
    .optional(),
  /** What an operator should know of this plan: an SLO split evenly because query analysis found none, sessions without a backend. */
  warnings: z.array(z.string()).optional(),
  /** Per session and topic, the share of partitions each backend consumes. */
  routing: z.array(
    z.object({
      session: z.string().min(1),
      topic: z.string().min(1),
      weights: z.record(z.string(), z.number().nonnegative()),
    }),
  ),
});
export type Plan = z.infer<typeof plan>;

export const planContract = defineJsonContract<Plan>('plan', 1, plan);

/**
 * The plan's routing table as weights per topic: for each topic, the share of its partitions each
 * backend consumes, summed over the sessions the topic feeds. Undefined without a plan, or for a
 * topic the plan does not route, so consumers fall back to round-robin.
 */
export function planWeights(plan: Plan | undefined): (topic: string) => Record<string, number> | undefined {
  const byTopic = new Map<string, Record<string, number>>();
  for (const { topic, weights } of plan?.routing ?? []) {
    const sum = byTopic.get(topic) ?? {};
    for (const [backend, weight] of Object.entries(weights)) sum[backend] = (sum[backend] ?? 0) + weight;
    byTopic.set(topic, sum);
  }
  // Delay-tolerant frames and crops go to the backends' idle time, where the plan measured it; else where their live counterparts go.
  const idle = plan?.delayTolerant?.backends;
  const idleWeights = idle && Object.values(idle).some((w) => w > 0) ? idle : undefined;
  return (topic) => (idleWeights && isBackfillTopic(topic) ? idleWeights : byTopic.get(liveTopicOf(topic)));
}

/** The live topic a backfill topic stands beside (itself for any other). */
function liveTopicOf(topic: string): string {
  if (topic === Topics.backfillFrames) return Topics.frames;
  const model = taskTopicModel(topic);
  return model === undefined ? topic : Topics.tasks(model);
}
