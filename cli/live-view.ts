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
/** Sources whose frames are kept, those heard from least recently let go first: a bus can carry any number of source ids. */
const SOURCES_KEPT = 256;

/** `map[key] = value` as the most recently used entry, the least recently used let go past `limit`. */
function setRecent<V>(map: Map<string, V>, key: string, value: V, limit: number): void {
  map.delete(key);
  map.set(key, value);
  for (const oldest of map.keys()) {
    if (map.size <= limit) break;
    map.delete(oldest);
  }
}

export function createLiveView(options: { bus: Bus; logger: Logger }): LiveView {
  const { bus, logger } = options;
  const listeners = new Set<(event: LiveEvent) => void>();
  /** Per source, frames no row has named yet, by seq, and the stride of the seqs kept. */
  const pending = new Map<string, { stride: number; frames: Map<number, { width: number; height: number; jpeg: Uint8Array }> }>();
  const latest = new Map<string, LiveFrame>();
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

  const keepFrame = (source: string, seq: number, frame: { width: number; height: number; jpeg: Uint8Array }): void => {
    const kept = pending.get(source) ?? { stride: 1, frames: new Map() };
    setRecent(pending, source, kept, SOURCES_KEPT);
    if (seq % kept.stride !== 0) return;
    kept.frames.set(seq, frame);
    if (kept.frames.size <= FRAMES_KEPT) return;
    kept.stride *= 2;
    for (const old of kept.frames.keys()) if (old % kept.stride !== 0) kept.frames.delete(old);
  };

  /** Rows have come for `seq`: the frames before it will get none. */
  const analyzed = (source: string, seq: number): void => {
    const kept = pending.get(source);
    if (!kept) return;
    for (const old of kept.frames.keys()) if (old < seq) kept.frames.delete(old);
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
      setRecent(latest, row.source, frame, SOURCES_KEPT);
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
              keepFrame(frame.source, frame.seq, { width: frame.width, height: frame.height, jpeg: frame.jpeg });
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
