import type { AppLogic, AppNode, AppSpec, Box, FrameRef, NodeOutput, ResultRow } from '../core/index.js';
import { APP_TABLES, DETECTIONS, FRAMES, TEXTS } from './tables.js';

const round = (n: number): number => Math.round(n * 100) / 100;
const boxFields = (b: Box): Record<string, number> => ({ x1: round(b.x1), y1: round(b.y1), x2: round(b.x2), y2: round(b.y2) });

/**
 * Turns an app's node outputs into rows. Row ids are built from the app, source, frame and
 * node, so replaying a frame produces the same ids and the tables keep one copy.
 */
export function createAppLogic(spec: AppSpec): AppLogic {
  return {
    spec,
    tables: APP_TABLES,
    rowsFor({ node, frame, output }: { node: AppNode; frame: FrameRef; output: NodeOutput }): ResultRow[] {
      const id = `${spec.name}/${frame.source}/${frame.seq}/${node.id}`;
      const common = { frame_seq: frame.seq, frame_time: Math.round(frame.captureTimeMs), node: node.id };
      const row = (table: string, rowId: string, fields: ResultRow['fields']): ResultRow => ({
        app: spec.name,
        table,
        rowId,
        source: frame.source,
        fields: { ...common, ...fields },
      });

      if (output.kind === 'texts') {
        return output.texts.map((t, i) => row(TEXTS.name, `${id}/${i}`, { text: t.text, score: Math.round(t.score * 1000) / 1000, ...boxFields(t.box) }));
      }
      const counts: Record<string, number> = {};
      for (const d of output.detections) counts[d.className] = (counts[d.className] ?? 0) + 1;
      return [
        ...output.detections.map((d, i) =>
          row(DETECTIONS.name, `${id}/${i}`, { class: d.className, score: Math.round(d.score * 1000) / 1000, ...boxFields(d.box) }),
        ),
        row(FRAMES.name, id, {
          width: frame.width,
          height: frame.height,
          objects: output.detections.length,
          class_counts: JSON.stringify(counts),
        }),
      ];
    },
  };
}
