import { outputId, type AppLogic, type AppSpec, type Box, type NodeResult, type ResultRow } from '../core/index.js';
import { APP_TABLES, DETECTIONS, FRAMES, RECOGNITIONS } from './tables.js';

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
 */
export function createAppLogic(spec: AppSpec): AppLogic {
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
        return output.texts.map((t, i) =>
          row(RECOGNITIONS.name, outputId(inputId, node.id, i), {
            kind: 'text',
            name: '',
            value: t.text,
            number: numberIn(t.text),
            score: Math.round(t.score * 1000) / 1000,
            object_id: root ? '' : inputId,
            ...boxFields(t.box),
          }),
        );
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
