import { frameId, outputId, type AppLogic, type AppSpec, type Box, type NodeResult, type ResultRow, type TextLine } from '../core/index.js';
import { createChangeDetector, createTextParser, type ChangeDetector, type FieldValue, type TextParser } from './operators/index.js';
import { APP_TABLES, DETECTIONS, EVENTS, FRAMES, RECOGNITIONS } from './tables.js';

const valueText = (value: FieldValue | null): string => (value === null ? '' : String(value));
const round = (n: number): number => Math.round(n * 100) / 100;
const boxFields = (b: Box): Record<string, number> => ({ x1: round(b.x1), y1: round(b.y1), x2: round(b.x2), y2: round(b.y2) });

/** The number a text spells, e.g. "1,250" or "-3.5"; 0 when it spells none. */
function numberIn(text: string): number {
  const plain = text.trim().replace(/(?<=\d),(?=\d{3}\b)/g, '');
  return /^-?\d+(\.\d+)?$/.test(plain) ? Number(plain) : 0;
}

/**
 * Turns an app's node outputs into rows: one per detection or recognized text line, plus one summary per
 * frame for nodes fed by frames. Row ids are the outputs' ids (core's `outputId`).
 *
 * A node with `parse` also reads its field out of each text line: a `recognitions` row of kind
 * `field`, and an `events` row when the field's value changes in its source. The change
 * detector keeps one state per source, so events assume a source's frames come in order; a
 * reading from an earlier frame than the last one seen is stored but makes no event.
 */
export function createAppLogic(spec: AppSpec): AppLogic {
  const parsers = new Map<string, { parser: TextParser; changes: Map<string, ChangeDetector>; confirmFrames: number }>();
  for (const node of spec.nodes) {
    if (node.parse) parsers.set(node.id, { parser: createTextParser([node.parse]), changes: new Map(), confirmFrames: node.parse.confirmFrames });
  }

  return {
    spec,
    tables: APP_TABLES,
    rowsFor({ node, frame, output, inputId, root }: NodeResult): ResultRow[] {
      const common = { frame_seq: frame.seq, frame_time: Math.round(frame.mediaTimeMs ?? frame.captureTimeMs), node: node.id };
      const row = (table: string, rowId: string, fields: ResultRow['fields']): ResultRow => ({
        app: spec.name,
        table,
        rowId,
        source: frame.source,
        fields: { ...common, ...fields },
      });

      if (output.kind === 'texts') {
        const recognition = (t: TextLine, rowId: string, fields: { kind: string; name: string; value: string; number: number }): ResultRow =>
          row(RECOGNITIONS.name, rowId, { ...fields, score: Math.round(t.score * 1000) / 1000, object_id: root ? '' : inputId, ...boxFields(t.box) });
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
            fields: { frame_seq: change.seq, frame_time: change.timeMs, node: node.id, event: 'change', name: field, track_id: '', class: '', direction: '', value: String(value), previous: valueText(change.previous), duration_ms: 0 },
          });
        });
        return rows;
      }
      const counts: Record<string, number> = {};
      for (const d of output.detections) counts[d.className] = (counts[d.className] ?? 0) + 1;
      const rows = output.detections.map((d, i) =>
        row(DETECTIONS.name, outputId(inputId, node.id, i), { class: d.className, score: Math.round(d.score * 1000) / 1000, ...boxFields(d.box) }),
      );
      if (root) {
        rows.push(row(FRAMES.name, `${inputId}/${node.id}`, {
          width: frame.width,
          height: frame.height,
          objects: output.detections.length,
          class_counts: JSON.stringify(counts),
        }));
      }
      return rows;
    },
  };
}
