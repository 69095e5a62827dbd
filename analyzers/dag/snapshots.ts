import type { ResultRow } from '../../core/index.js';
import { annotatedJpeg, type ImageInput, type LabelledBox } from '../image/index.js';
import type { SnapshotStore } from './types.js';

/** Events worth a picture: the object is in the frame they were seen on (a track's end is not). */
const PICTURED = new Set(['line_crossing', 'dwell', 'change']);

/**
 * Takes a picture of each event among `rows` (one node's rows for one frame): the frame with the
 * boxes of what the event is about (the tracked object's detection, the field's text) drawn and
 * labelled, kept by `store`; the event's row records where. A picture that cannot be made or
 * kept leaves the row without one, and the row goes on.
 */
export async function pictureEvents(rows: ResultRow[], frame: ImageInput, store: SnapshotStore, onError: (err: unknown) => void): Promise<void> {
  for (const row of rows) {
    const { event } = row.fields;
    if (row.table !== 'events' || typeof event !== 'string' || !PICTURED.has(event)) continue;
    try {
      const jpeg = await annotatedJpeg(frame, boxesOf(row, rows));
      row.fields.snapshot = (await store.save(row, jpeg)) ?? '';
    } catch (err) {
      onError(err);
    }
  }
}

/** The boxes an event is about, labelled with the event. */
function boxesOf(event: ResultRow, rows: readonly ResultRow[]): LabelledBox[] {
  const f = event.fields;
  const label =
    f.event === 'change' ? `${String(f.name)}: ${String(f.previous)} → ${String(f.value)}` : `${String(f.class)} #${String(f.track_id)} ${f.event === 'dwell' ? 'left' : 'crossed'} ${String(f.name)}${f.direction ? ` ${String(f.direction)}` : ''}`;
  const about = (row: ResultRow): boolean =>
    f.event === 'change' ? row.table === 'recognitions' && row.fields.kind === 'field' && row.fields.name === f.name : row.table === 'detections' && row.fields.track_id === f.track_id;
  return rows.filter(about).map((row) => ({ label, box: { x1: Number(row.fields.x1), y1: Number(row.fields.y1), x2: Number(row.fields.x2), y2: Number(row.fields.y2) } }));
}
