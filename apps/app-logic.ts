import { frameId, MAX_APP_NODES, outputId, type AppLogic, type AppSpec, type Box, type FrameRef, type NodeResult, type ResultRow, type TextLine } from '../core/index.js';
import { createChangeDetector, createTextParser, STREAM_RESTART_GAP, type ChangeDetector, type FieldValue, type TextParser } from './operators/index.js';
import { APP_TABLES, DETECTIONS, EVENTS, FRAMES, RECOGNITIONS } from './tables.js';
import { createSourceTracking, type SourceTracking, type TrackEvent } from './tracking.js';

const valueText = (value: FieldValue | null): string => (value === null ? '' : String(value));
const round = (n: number): number => Math.round(n * 100) / 100;
const boxFields = (b: Box): Record<string, number> => ({ x1: round(b.x1), y1: round(b.y1), x2: round(b.x2), y2: round(b.y2) });
const frameTime = (frame: FrameRef): number => Math.round(frame.mediaTimeMs ?? frame.captureTimeMs);

/** The number a text spells, e.g. "1,250" or "-3.5"; 0 when it spells none. */
function numberIn(text: string): number {
  const plain = text.trim().replace(/(?<=\d),(?=\d{3}\b)/g, '');
  return /^-?\d+(\.\d+)?$/.test(plain) ? Number(plain) : 0;
}

/**
 * Outputs of tracked detections whose descendants may still come: enough for the tasks of many
 * frames in flight. Past it the oldest go; a late descendant then gets no track id.
 */
const MAX_TRACKED_OUTPUTS = 20_000;

interface Owner {
  node: string;
  source: string;
  trackId: string;
}

/**
 * Turns an app's node outputs into rows: one per detection, recognized text line or attribute,
 * plus one summary per frame for nodes fed by frames. Row ids are the outputs' ids (core's
 * `outputId`), so a replay writes the same rows again.
 *
 * Operators keep state per source and assume a source's frames come in order:
 * - a node with `parse` reads a field out of each text line: a `recognitions` row of kind
 *   `field`, and an `events` row when the field's value changes;
 * - a node with `track` gives its detections track ids, and its `lines` and `zones` make
 *   `line_crossing` and `dwell` events; each track that ends makes a `track` event. Descendants'
 *   outputs on a tracked object (a face found on a person, its age read) carry its track id and
 *   are gathered into that event.
 */
/** `app/source/seq` and a `/<node>/<index>` per generation, for a chain of an app's most nodes. */
const MAX_ID_PARTS = 3 + 2 * MAX_APP_NODES;

export function createAppLogic(spec: AppSpec): AppLogic {
  const parsers = new Map<string, { parser: TextParser; changes: Map<string, ChangeDetector>; confirmFrames: number }>();
  /** When each source's last result came, from any node: its change detectors go once it is quiet. */
  const heardMs = new Map<string, number>();
  for (const node of spec.nodes) {
    if (node.parse) parsers.set(node.id, { parser: createTextParser([node.parse]), changes: new Map(), confirmFrames: node.parse.confirmFrames });
  }
  /** Per tracking node, per source: its operators, and when its last frame came (wall clock). */
  const tracking = new Map<string, Map<string, { state: SourceTracking; lastFrameMs: number; lastSeq: number }>>();
  for (const node of spec.nodes) if (node.track) tracking.set(node.id, new Map());
  /** Output id of a tracked detection → its track. */
  const owners = new Map<string, Owner>();

  const sourceTracking = (nodeId: string, source: string): { state: SourceTracking; lastFrameMs: number; lastSeq: number } => {
    const bySource = tracking.get(nodeId)!;
    let entry = bySource.get(source);
    if (!entry) bySource.set(source, (entry = { state: createSourceTracking(spec.nodes.find((n) => n.id === nodeId)!), lastFrameMs: Date.now(), lastSeq: -1 }));
    return entry;
  };

  /** The tracked detection an input descends from: the input itself, or its nearest ancestor (ids nest as `<parent>/<node>/<index>`). */
  const ownerOf = (inputId: string): Owner | undefined => {
    const parts = inputId.split('/');
    // An id with more generations than an app has nodes is none this app made (and each try below joins the whole id).
    if (parts.length > MAX_ID_PARTS) return undefined;
    // `app/source/seq` is the frame; each `/<node>/<index>` after it is one generation.
    for (let n = parts.length; n > 3; n -= 2) {
      const owner = owners.get(parts.slice(0, n).join('/'));
      if (owner) return owner;
    }
    return undefined;
  };

  /** Strictly increasing: a `track` event written again in the same millisecond is still the later version. */
  let lastVersionMs = 0;
  const nextVersionMs = (): number => (lastVersionMs = Math.max(Date.now(), lastVersionMs + 1));

  const eventRow = (source: string, node: string, e: TrackEvent): ResultRow => {
    const at = frameId(spec.name, source, e.seq);
    const common = { frame_seq: e.seq, frame_time: e.timeMs, node, track_id: e.trackId, class: e.className, previous: '', snapshot: '' };
    switch (e.event) {
      case 'line_crossing':
        return { app: spec.name, table: EVENTS.name, rowId: `${at}/line_crossing/${node}/${e.name}/${e.trackId}/${e.direction}`, source, fields: { ...common, event: e.event, name: e.name, direction: e.direction, value: '', duration_ms: 0 } };
      case 'dwell':
        return { app: spec.name, table: EVENTS.name, rowId: `${at}/dwell/${node}/${e.name}/${e.trackId}`, source, fields: { ...common, event: e.event, name: e.name, direction: '', value: '', duration_ms: e.durationMs } };
      case 'track':
        // Written again when a late result revises it, in a message that can arrive before this one.
        return {
          app: spec.name,
          table: EVENTS.name,
          rowId: `${at}/track/${node}/${e.trackId}`,
          source,
          fields: { ...common, event: e.event, name: node, direction: '', value: JSON.stringify(e.summary), duration_ms: e.durationMs },
          versionMs: nextVersionMs(),
        };
    }
  };

  /** The rows of a node's output; `trackOfInput` is the track its input belongs to ('' for none). */
  const outputRows = ({ node, frame, output, inputId, root }: NodeResult, trackOfInput: string): ResultRow[] => {
    const common = { frame_seq: frame.seq, frame_time: frameTime(frame), node: node.id, model: output.servedBy ?? node.model };
    const row = (table: string, rowId: string, fields: ResultRow['fields']): ResultRow => ({
      app: spec.name,
      table,
      rowId,
      source: frame.source,
      fields: { ...common, ...fields },
    });

    if (output.kind === 'attributes') {
      return output.attributes.map((a, i) =>
        row(RECOGNITIONS.name, outputId(inputId, node.id, i), {
          kind: 'attribute',
          name: a.name,
          value: a.value,
          number: a.number,
          score: Math.round(a.score * 1000) / 1000,
          object_id: root ? '' : inputId,
          x1: 0,
          y1: 0,
          x2: 0,
          y2: 0,
          track_id: trackOfInput,
          answered_by: output.answeredBy ?? '',
          exit: output.exit?.at ?? '',
          cache_variant: output.exit?.variant ?? '',
        }),
      );
    }

    if (output.kind === 'texts') {
      const recognition = (t: TextLine, rowId: string, fields: { kind: string; name: string; value: string; number: number }): ResultRow =>
        row(RECOGNITIONS.name, rowId, { ...fields, score: Math.round(t.score * 1000) / 1000, object_id: root ? '' : inputId, ...boxFields(t.box), track_id: trackOfInput, answered_by: '', exit: '', cache_variant: '' });
      const rows = output.texts.map((t, i) => recognition(t, outputId(inputId, node.id, i), { kind: 'text', name: '', value: t.text, number: numberIn(t.text) }));
      const parsing = parsers.get(node.id);
      if (!parsing) return rows;
      output.texts.forEach((t, i) => {
        // Full-width digits (０６), which a Chinese-trained recognizer emits at times, are digits.
        const [parsed] = parsing.parser.parse([t.text.normalize('NFKC')]);
        if (!parsed) return;
        const { field, value } = parsed;
        // A time keeps its text (04:46) as the value; its number is seconds.
        const text = node.parse?.type === 'time' ? parsed.text : String(value);
        rows.push(recognition(t, `${outputId(inputId, node.id, i)}/field`, { kind: 'field', name: field, value: text, number: typeof value === 'number' ? value : 0 }));
        let changes = parsing.changes.get(frame.source);
        if (!changes) parsing.changes.set(frame.source, (changes = createChangeDetector({ confirmFrames: parsing.confirmFrames })));
        const change = changes.update(field, value, { seq: frame.seq, timeMs: common.frame_time });
        if (!change) return;
        rows.push({
          app: spec.name,
          table: EVENTS.name,
          rowId: `${frameId(spec.name, frame.source, change.seq)}/change/${field}`,
          source: frame.source,
          fields: { frame_seq: change.seq, frame_time: change.timeMs, node: node.id, event: 'change', name: field, track_id: '', class: '', direction: '', value: String(value), previous: valueText(change.previous), duration_ms: 0, snapshot: '' },
        });
      });
      return rows;
    }

    const { detections } = output;
    let trackIds: (string | undefined)[] = [];
    const events: ResultRow[] = [];
    if (node.track && root) {
      let tracked = sourceTracking(node.id, frame.source);
      if (frame.seq + STREAM_RESTART_GAP < tracked.lastSeq) {
        // The stream starts again (see STREAM_RESTART_GAP): its tracks so far end here.
        events.push(...tracked.state.flush().map((e) => eventRow(frame.source, node.id, e)));
        tracking.get(node.id)!.delete(frame.source);
        tracked = sourceTracking(node.id, frame.source);
      }
      tracked.lastFrameMs = Date.now();
      tracked.lastSeq = Math.max(tracked.lastSeq, frame.seq);
      const update = tracked.state.update({ seq: frame.seq, timeMs: common.frame_time, width: frame.width, height: frame.height }, detections);
      trackIds = update.trackIds;
      trackIds.forEach((trackId, i) => {
        if (trackId !== undefined) owners.set(outputId(inputId, node.id, i), { node: node.id, source: frame.source, trackId });
      });
      for (const id of owners.keys()) {
        if (owners.size <= MAX_TRACKED_OUTPUTS) break;
        owners.delete(id);
      }
      events.push(...update.events.map((e) => eventRow(frame.source, node.id, e)));
    }
    const counts: Record<string, number> = {};
    for (const d of detections) counts[d.className] = (counts[d.className] ?? 0) + 1;
    const exit = { exit: output.exit?.at ?? '', cache_variant: output.exit?.variant ?? '' };
    const rows = detections.map((d, i) =>
      row(DETECTIONS.name, outputId(inputId, node.id, i), { class: d.className, score: Math.round(d.score * 1000) / 1000, ...boxFields(d.box), track_id: trackIds[i] ?? trackOfInput, ...exit }),
    );
    if (root) {
      rows.push(row(FRAMES.name, `${inputId}/${node.id}`, {
        width: frame.width,
        height: frame.height,
        objects: detections.length,
        class_counts: JSON.stringify(counts),
        ...exit,
      }));
    }
    return [...rows, ...events];
  };

  return {
    spec,
    tables: APP_TABLES,
    rowsFor(result: NodeResult): ResultRow[] {
      if (parsers.size > 0) heardMs.set(result.frame.source, Date.now());
      const owner = result.root ? undefined : ownerOf(result.inputId);
      // A result on a track that has ended already writes its `track` event again, with what it adds (the row replaces the first).
      const revised = owner && tracking.get(owner.node)?.get(owner.source)?.state.observe(owner.trackId, result.node.id, result.frame.seq, result.output);
      const rows = outputRows(result, owner?.trackId ?? '');
      return revised ? [...rows, eventRow(owner.source, owner.node, revised)] : rows;
    },

    flush() {
      return [...tracking].flatMap(([node, bySource]) => [...bySource].flatMap(([source, { state }]) => state.flush().map((e) => eventRow(source, node, e))));
    },

    flushIdle(idleMs) {
      const now = Date.now();
      // A source gone quiet has no pending change to tell: its detectors go (a source added again starts afresh).
      for (const [source, atMs] of heardMs) {
        if (now - atMs < idleMs) continue;
        heardMs.delete(source);
        for (const { changes } of parsers.values()) changes.delete(source);
      }
      return [...tracking].flatMap(([node, bySource]) =>
        [...bySource].flatMap(([source, { state, lastFrameMs }]) => {
          if (now - lastFrameMs < idleMs) return [];
          bySource.delete(source);
          return state.flush().map((e) => eventRow(source, node, e));
        }),
      );
    },
  };
}
