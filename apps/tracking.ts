import type { AppNode, Detection, NodeOutput } from '../core/index.js';
import {
  createAttributeAggregator,
  createLineCrossing,
  createTracker,
  createZoneDwell,
  type EndedTrack,
  type FrameInfo,
  type Gender,
  type ZoneDwell,
} from './operators/index.js';

/** What a tracked node's operators report, ready to become `events` rows. */
export type TrackEvent =
  | { event: 'line_crossing'; name: string; trackId: string; className: string; direction: string; seq: number; timeMs: number }
  | { event: 'dwell'; name: string; trackId: string; className: string; seq: number; timeMs: number; durationMs: number }
  | { event: 'track'; trackId: string; className: string; seq: number; timeMs: number; durationMs: number; summary: TrackSummary };

/** What was gathered about one object while it was tracked; the `value` of its `track` event. */
export interface TrackSummary {
  /** Analyzed frames it was seen in. */
  frames: number;
  /** Per descendant node, frames on which that node found something on the object (a face, a plate). */
  seen: Record<string, number>;
  /** Median age and voted gender of the attributes read on it (or on its face). */
  age?: number;
  gender?: Gender;
  /** The face identity (`person-N`) read on it most, by score, where a face-identity model read any. */
  identity?: string;
}

export interface SourceTracking {
  /** Track ids for a frame's detections, in their order (undefined: not a tracked class, or a stale frame), and the events it ends. */
  update(frame: FrameInfo, detections: readonly Detection[]): { trackIds: (string | undefined)[]; events: TrackEvent[] };
  /**
   * A descendant node's output on a tracked object: counted in its summary, attributes
   * aggregated. For a track that has ended already (its descendants' work on its last frames can
   * finish after the root has moved on), the `track` event again, to be written over the first.
   */
  observe(trackId: string, node: string, seq: number, output: NodeOutput): TrackEvent | undefined;
  /** Ends every track (the end of a stream): their `track` and `dwell` events. */
  flush(): TrackEvent[];
}

/** Ended tracks whose events are kept ready to be written again, per source and tracking node: the latest. */
const MAX_ENDED_KEPT = 256;
/** Frames a track's node remembers to count each once (a source's rows come in frame order; this is slack). */
const RECENT_FRAMES = 64;

const isEmpty = (output: NodeOutput): boolean =>
  (output.kind === 'detections' ? output.detections : output.kind === 'texts' ? output.texts : output.attributes).length === 0;

interface Gathered {
  /** Score per class: the track's class is the one with the most. */
  votes: Map<string, number>;
  /** Per descendant node, the frames on which it found something: counted, with the last few seqs to count each once (a track can live for days). */
  seen: Map<string, { frames: number; recent: Set<number> }>;
  /** Score per face identity read on it. */
  identities: Map<string, number>;
}

/**
 * The operators of one tracking node (`track`, `lines`, `zones`) for one source. A track's class
 * is a score-weighted vote over its detections, so a detector that calls one car `car` in one
 * frame and `truck` in the next gives one class; line crossings take the vote so far, `dwell`
 * and `track` events the final one.
 */
export function createSourceTracking(node: AppNode): SourceTracking {
  const track = node.track!;
  const tracker = createTracker(track);
  const lines = node.lines.map((l) => createLineCrossing(l));
  const zones = node.zones.map((z) => createZoneDwell(z));
  const minDwellMs = new Map(node.zones.map((z) => [z.name, z.minDwellMs]));
  const wanted = track.classes ? new Set(track.classes) : undefined;
  const gathered = new Map<string, Gathered>();
  const attributes = createAttributeAggregator();
  /** Tracks whose `track` event was written, the one ended longest ago first. */
  const written = new Map<string, EndedTrack>();

  const classOf = (trackId: string, fallback: string): string => mostVoted(gathered.get(trackId)?.votes) ?? fallback;

  const dwellEvents = (visits: ReturnType<ZoneDwell['flush']>): TrackEvent[] =>
    visits
      .filter((v) => v.dwellMs >= (minDwellMs.get(v.zone) ?? 0))
      .map((v) => ({ event: 'dwell', name: v.zone, trackId: v.trackId, className: classOf(v.trackId, v.className), seq: v.enterSeq, timeMs: v.enterMs, durationMs: v.dwellMs }));

  const trackEvent = (t: EndedTrack): TrackEvent => {
    const seen = gathered.get(t.trackId)?.seen ?? new Map<string, { frames: number }>();
    const summary: TrackSummary = { frames: t.age, seen: Object.fromEntries([...seen].map(([n, { frames }]) => [n, frames])) };
    const read = attributes.summary(t.trackId);
    if (read?.age !== undefined) summary.age = Math.round(read.age);
    if (read?.gender !== undefined) summary.gender = read.gender;
    const identity = mostVoted(gathered.get(t.trackId)?.identities);
    if (identity !== undefined) summary.identity = identity;
    return { event: 'track', trackId: t.trackId, className: classOf(t.trackId, t.className), seq: t.firstSeq, timeMs: t.firstSeenMs, durationMs: t.lastSeenMs - t.firstSeenMs, summary };
  };
  const ended = (tracks: readonly EndedTrack[]): TrackEvent[] => tracks.filter((t) => t.age >= track.minFrames).map(trackEvent);

  const drop = (trackId: string): void => {
    gathered.delete(trackId);
    attributes.forget(trackId);
  };
  /** What an ended track gathered is kept while its event is: a late result revises it. */
  const forget = (tracks: readonly EndedTrack[]): void => {
    for (const t of tracks) {
      if (t.age < track.minFrames) {
        drop(t.trackId);
        continue;
      }
      written.set(t.trackId, t);
      if (written.size <= MAX_ENDED_KEPT) continue;
      const [oldest] = written.keys();
      written.delete(oldest!);
      drop(oldest!);
    }
  };

  return {
    update(frame, detections) {
      const indices = detections.flatMap((d, i) => (!wanted || wanted.has(d.className) ? [i] : []));
      const update = tracker.update(frame, indices.map((i) => detections[i]!));
      const trackIds = new Array<string | undefined>(detections.length);
      update.tracks.forEach((t, k) => {
        trackIds[indices[k]!] = t.trackId;
        let g = gathered.get(t.trackId);
        if (!g) gathered.set(t.trackId, (g = { votes: new Map(), seen: new Map(), identities: new Map() }));
        g.votes.set(t.detection.className, (g.votes.get(t.detection.className) ?? 0) + t.detection.score);
      });
      if (update.stale) return { trackIds, events: [] };

      const tracked = { tracks: update.tracks, ended: update.ended };
      const events: TrackEvent[] = [];
      for (const line of lines) {
        for (const c of line.update(frame, tracked)) {
          events.push({ event: 'line_crossing', name: c.line, trackId: c.trackId, className: classOf(c.trackId, c.className), direction: c.direction, seq: c.seq, timeMs: c.timeMs });
        }
      }
      for (const zone of zones) events.push(...dwellEvents(zone.update(frame, tracked).visits));
      events.push(...ended(update.ended));
      forget(update.ended);
      return { trackIds, events };
    },

    observe(trackId, node, seq, output) {
      const g = gathered.get(trackId);
      if (!g || isEmpty(output)) return undefined;
      // Two faces found on one person in one frame are one frame with a face; crops come in any order.
      let seen = g.seen.get(node);
      if (!seen) g.seen.set(node, (seen = { frames: 0, recent: new Set() }));
      // Seqs come in frame order: one older than the window (a result delivered again long after) was counted already.
      const oldest = seen.recent.values().next().value;
      const counted = seen.recent.has(seq) || (seen.recent.size === RECENT_FRAMES && seq < oldest!);
      if (!counted) {
        seen.frames += 1;
        seen.recent.add(seq);
        if (seen.recent.size > RECENT_FRAMES) seen.recent.delete(oldest!);
      }
      const done = written.get(trackId);
      if (output.kind !== 'attributes') return done && trackEvent(done);
      const age = output.attributes.find((a) => a.name === 'age');
      const gender = output.attributes.find((a) => a.name === 'gender');
      const identity = output.attributes.find((a) => a.name === 'identity');
      if (identity) g.identities.set(identity.value, (g.identities.get(identity.value) ?? 0) + identity.score);
      attributes.observe(trackId, {
        ...(age ? { age: age.number } : {}),
        ...(gender && (gender.value === 'male' || gender.value === 'female') ? { gender: gender.value, score: gender.score } : {}),
      });
      return done && trackEvent(done);
    },

    flush() {
      const events = zones.flatMap((zone) => dwellEvents(zone.flush()));
      const tracks = tracker.flush();
      events.push(...ended(tracks));
      forget(tracks);
      return events;
    },
  };
}

/** The key with the most score; undefined for none. */
function mostVoted(votes: ReadonlyMap<string, number> | undefined): string | undefined {
  let [best, most] = [undefined as string | undefined, -Infinity];
  for (const [key, score] of votes ?? []) if (score > most) [best, most] = [key, score];
  return best;
}
