/**
 * What the HTTP API shows of a running pipeline as it happens: a consumer group of its own on
 * the bus (so it sees what every backend and ingest worker sends, here or elsewhere) keeps each
 * source's newest analyzed frame with its objects, the plans, and passes stats, drops and
 * events on to whoever listens (the dashboard's event stream). It only reads; it keeps a few
 * frames per source and nothing else that grows.
 */
import { randomBytes } from 'node:crypto';
import type { LabelledBox } from '../analyzers/index.js';
import { Channels, isFramesTopic, Topics, type Bus, type Consumer, type Drop, type Logger, type Plan, type ResultRow, type Stats } from '../core/index.js';

/** One thing a frame was found to hold, in the frame's pixels. */
export type LiveObject = LabelledBox;

export interface LiveFrame {
  source: string;
  seq: number;
  /** When the frame was analyzed here, ms since epoch. */
  atMs: number;
  width: number;
  height: number;
  jpeg: Uint8Array;
  objects: LiveObject[];
}

export type LiveEvent =
  | { type: 'stats'; stats: Stats }
  | { type: 'drop'; drop: Drop }
  | { type: 'event'; app: string; source: string; fields: ResultRow['fields'] }
  | { type: 'frame'; source: string; seq: number; objects: number }
  | { type: 'plan'; epoch: number; backends: Plan['backends'] };

export interface LiveView {
  start(): Promise<void>;
  close(): Promise<void>;
  /** Calls `listener` with each event from now on; returns what stops it. */
  subscribe(listener: (event: LiveEvent) => void): () => void;
  latestFrame(source: string): LiveFrame | undefined;
  /** The newest plan and those before it, newest first (at most `PLAN_HISTORY`). */
  plans(): readonly Plan[];
  /** Rows seen per table and drops, since this process started. */
  counts(): { rows: Record<string, number>; drops: number };
}

/**
 * Frames kept per source while their rows are on the way. Ingest can run far ahead of the models
 * (a replay at full speed): then every other kept frame is let go, and only every 2nd, 4th, …
 * frame is kept, so that some frames are still here when their rows come.
 */
const FRAMES_KEPT = 32;
const PLAN_HISTORY = 50;
/**
 * Bytes of frames kept waiting for their rows, all sources together: a bus can carry any number
 * of source ids. Past it, the frames of the source heard from longest ago go first. Honest
 * sources hold a frame or two each once their rows flow (256 MB is over 2,000 sources of 720p).
 */
const PENDING_BYTES = 256 * 1024 * 1024;
/** Sources whose latest analyzed frame is kept (one frame each, in `keepBytes` at most too), those heard from longest ago let go first. */
const LATEST_KEPT = 4096;

type PendingFrame = { width: number; height: number; jpeg: Uint8Array };

/** `keepBytes`: the frames kept waiting for their rows, at most, and the latest frames too (PENDING_BYTES, scaled down in tests). */
export function createLiveView(options: { bus: Bus; logger: Logger; keepBytes?: number }): LiveView {
  const { bus, logger } = options;
  const keepBytes = options.keepBytes ?? PENDING_BYTES;
  const listeners = new Set<(event: LiveEvent) => void>();
  /** Per source, frames no row has named yet, by seq, and the stride of the seqs kept. */
  const pending = new Map<string, { stride: number; frames: Map<number, PendingFrame> }>();
  const latest = new Map<string, LiveFrame>();
  let latestBytes = 0;
  const history: Plan[] = [];
  const rows: Record<string, number> = {};
  let drops = 0;
  let consumer: Consumer | undefined;

  const emit = (event: LiveEvent): void => {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (err) {
        logger.warn({ err }, 'a live event listener failed');
      }
    }
  };

  let pendingBytes = 0;
  const letGo = (frames: Map<number, PendingFrame>, seq: number): void => {
    pendingBytes -= frames.get(seq)?.jpeg.byteLength ?? 0;
    frames.delete(seq);
  };

  const keepFrame = (source: string, seq: number, frame: PendingFrame): void => {
    const kept = pending.get(source) ?? { stride: 1, frames: new Map<number, PendingFrame>() };
    // The most recently heard last: the first entries are the ones let go when memory runs short.
    pending.delete(source);
    pending.set(source, kept);
    if (seq % kept.stride === 0) {
      letGo(kept.frames, seq);
      kept.frames.set(seq, frame);
      pendingBytes += frame.jpeg.byteLength;
      if (kept.frames.size > FRAMES_KEPT) {
        kept.stride *= 2;
        for (const old of kept.frames.keys()) if (old % kept.stride !== 0) letGo(kept.frames, old);
      }
    }
    for (const [oldest, { frames }] of pending) {
      if (pendingBytes <= keepBytes || oldest === source) break;
      for (const old of frames.keys()) letGo(frames, old);
      pending.delete(oldest);
    }
  };

  /** Rows have come for `seq`: the frames before it will get none. */
  const analyzed = (source: string, seq: number): void => {
    const kept = pending.get(source);
    if (!kept) return;
    for (const old of kept.frames.keys()) if (old < seq) letGo(kept.frames, old);
    if (kept.frames.size < FRAMES_KEPT / 4) kept.stride = Math.max(1, kept.stride / 2);
  };

  /** The frame a row is about becomes its source's latest once a model has run on it; its objects gather as their rows come. */
  const noteRow = (row: ResultRow): void => {
    rows[row.table] = (rows[row.table] ?? 0) + 1;
    if (row.table === 'events') emit({ type: 'event', app: row.app, source: row.source, fields: row.fields });
    const seq = row.fields.frame_seq;
    if (typeof seq !== 'number') return;
    let frame = latest.get(row.source);
    if (frame?.seq !== seq) {
      const pixels = pending.get(row.source)?.frames.get(seq);
      analyzed(row.source, seq);
      // Frames before the latest were let go when it came; one here is newer, or a restarted source's.
      if (!pixels) return;
      frame = { source: row.source, seq, atMs: Date.now(), ...pixels, objects: [] };
      latestBytes += frame.jpeg.byteLength - (latest.get(row.source)?.jpeg.byteLength ?? 0);
      latest.delete(row.source);
      latest.set(row.source, frame);
      // Bounded in count and in bytes (4,096 frames of 1080p would be over a gigabyte); the newest stays.
      for (const [oldest, kept] of latest) {
        if ((latest.size <= LATEST_KEPT && latestBytes <= keepBytes) || oldest === row.source) break;
        latestBytes -= kept.jpeg.byteLength;
        latest.delete(oldest);
      }
    }
    const object = objectOf(row);
    if (object) frame.objects.push(object);
    if (row.table === 'frames') emit({ type: 'frame', source: row.source, seq, objects: frame.objects.length });
  };

  return {
    async start() {
      consumer = bus.consumer({ groupId: `panoptes.live.${process.pid}.${randomBytes(4).toString('hex')}`, topics: [Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan] });
      await consumer.run(async ({ topic, messages }) => {
        for (const message of messages) {
          try {
            if (isFramesTopic(topic)) {
              const frame = Channels.frames.decode(message.value);
              // Its own copy: the decoded JPEG is a view of the whole fetched batch, which keeping it would keep.
              keepFrame(frame.source, frame.seq, { width: frame.width, height: frame.height, jpeg: new Uint8Array(frame.jpeg) });
            } else if (topic === Topics.results) noteRow(Channels.results.decode(message.value));
            else if (topic === Topics.drops) {
              drops += 1;
              emit({ type: 'drop', drop: Channels.drops.decode(message.value) });
            } else if (topic === Topics.stats) emit({ type: 'stats', stats: Channels.stats.decode(message.value) });
            else if (topic === Topics.plan) {
              const plan = Channels.plan.decode(message.value);
              history.unshift(plan);
              history.length = Math.min(history.length, PLAN_HISTORY);
              emit({ type: 'plan', epoch: plan.epoch, backends: plan.backends });
            }
          } catch (err) {
            // The stages that own these records deal with bad ones (dead letters); here it is only not shown.
            logger.debug({ err, topic }, 'live view: a record it cannot read');
          }
        }
      });
    },
    async close() {
      await consumer?.close();
      listeners.clear();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    latestFrame: (source) => latest.get(source),
    plans: () => history,
    counts: () => ({ rows: { ...rows }, drops }),
  };
}

/** What a detection or a recognition row draws on its frame; undefined for rows without a box. */
function objectOf(row: ResultRow): LiveObject | undefined {
  const { x1, y1, x2, y2 } = row.fields;
  if (typeof x1 !== 'number' || typeof y1 !== 'number' || typeof x2 !== 'number' || typeof y2 !== 'number' || x2 <= x1 || y2 <= y1) return undefined;
  const f = row.fields;
  const track = f.track_id ? ` #${String(f.track_id)}` : '';
  if (row.table === 'detections') return { label: `${String(f.class)} ${Number(f.score).toFixed(2)}${track}`, box: { x1, y1, x2, y2 } };
  if (row.table === 'recognitions') return { label: f.name ? `${String(f.name)}: ${String(f.value)}` : String(f.value), box: { x1, y1, x2, y2 } };
  return undefined;
}
