import { describe, expect, it } from 'vitest';
import { APP_TABLES, createAppLogic, DETECTIONS, FRAMES, RECOGNITIONS } from '../../apps/index.js';
import { appSpecSchema, frameId, outputId, parseConfig, type AppSpec, type Detection, type FrameRef, type NodeOutput, type ResultRow } from '../../core/index.js';
import { evenSloSplit } from '../../scheduler/index.js';
import { rowProblem } from '../../sinks/schema.js';

function app(yaml: string): AppSpec {
  return parseConfig(appSpecSchema, yaml, 'test-app.yaml');
}

const traffic = app(`name: traffic
sloMs: 2000
nodes:
  - id: detect
    model: centernet
  - id: ocr
    model: ppocr-rec
edges:
  - from: frames
    to: detect
  - from: detect
    to: ocr
`);
const detectNode = traffic.nodes[0] as AppSpec['nodes'][number];
const ocrNode = traffic.nodes[1] as AppSpec['nodes'][number];

const frame: FrameRef = { source: 'cam-1', seq: 41, captureTimeMs: 1_700_000_000_500.4, width: 768, height: 432 };

/** What the backend passes for a node fed by frames, and for one fed by the first detection's crop. */
const root = (f: FrameRef, appName = 'traffic'): { inputId: string; root: boolean } => ({ inputId: frameId(appName, f.source, f.seq), root: true });
const child = { inputId: outputId(frameId('traffic', 'cam-1', 41), 'detect', 0), root: false };

const det = (className: string, score: number, x1: number): Detection => ({
  box: { x1, y1: 10.123, x2: x1 + 50.456, y2: 80.999 },
  classId: className === 'car' ? 2 : 0,
  className,
  score,
});

const detections: NodeOutput = { kind: 'detections', detections: [det('car', 0.87654, 10), det('person', 0.5, 100), det('car', 0.61, 200)] };

describe('app logic', () => {
  const logic = createAppLogic(traffic);

  it('declares the shared tables', () => {
    expect(logic.spec).toBe(traffic);
    expect(logic.tables).toBe(APP_TABLES);
    expect(logic.tables.map((t) => t.name)).toEqual(['detections', 'frames', 'recognitions', 'events']);
  });

  it('gives one detections row per detection and one frames summary row', () => {
    const rows = logic.rowsFor({ ...root(frame), node: detectNode, frame, output: detections });
    const byTable = (name: string): ResultRow[] => rows.filter((r) => r.table === name);
    expect(byTable('detections')).toHaveLength(3);
    expect(byTable('frames')).toHaveLength(1);
    expect(rows).toHaveLength(4);

    for (const row of rows) {
      expect(row.app).toBe('traffic');
      expect(row.source).toBe('cam-1');
      expect(row.fields).toMatchObject({ frame_seq: 41, frame_time: 1_700_000_000_500, node: 'detect' });
    }
    const [first] = byTable('detections');
    expect(first?.fields).toMatchObject({ class: 'car', score: 0.877, x1: 10, y1: 10.12, x2: 60.46, y2: 81 });
    expect(byTable('detections').map((r) => r.fields.class)).toEqual(['car', 'person', 'car']);

    const summary = byTable('frames')[0];
    expect(summary?.fields).toMatchObject({ width: 768, height: 432, objects: 3 });
    expect(JSON.parse(String(summary?.fields.class_counts))).toEqual({ car: 2, person: 1 });
  });

  it('gives a frames row with empty counts for a frame with no detections', () => {
    const rows = logic.rowsFor({ ...root(frame), node: detectNode, frame, output: { kind: 'detections', detections: [] } });
    expect(rows).toHaveLength(1);
    expect(rows[0]?.table).toBe('frames');
    expect(rows[0]?.fields).toMatchObject({ objects: 0, class_counts: '{}' });
  });

  it('makes rows that fit their tables', () => {
    const tables = new Map([DETECTIONS, FRAMES, RECOGNITIONS].map((t) => [t.name, t]));
    const texts: NodeOutput = { kind: 'texts', texts: [{ text: 'AB 123', score: 0.9, box: { x1: 1, y1: 2, x2: 3, y2: 4 } }] };
    const rows = [...logic.rowsFor({ ...root(frame), node: detectNode, frame, output: detections }), ...logic.rowsFor({ ...child, node: ocrNode, frame, output: texts })];
    for (const row of rows) {
      const table = tables.get(row.table);
      expect(table, row.table).toBeDefined();
      expect(rowProblem(table as (typeof APP_TABLES)[number], row), row.rowId).toBeUndefined();
    }
  });

  it('derives row ids deterministically from app, source, frame and node', () => {
    const once = logic.rowsFor({ ...root(frame), node: detectNode, frame, output: detections });
    const again = createAppLogic(traffic).rowsFor({ ...root(frame), node: detectNode, frame: { ...frame }, output: structuredClone(detections) });
    expect(again).toEqual(once);
    const ids = once.map((r) => r.rowId);
    expect(new Set(ids).size).toBe(ids.length);

    const other = (changed: Partial<FrameRef>): string[] =>
      logic.rowsFor({ ...root({ ...frame, ...changed }), node: detectNode, frame: { ...frame, ...changed }, output: detections }).map((r) => r.rowId);
    for (const changed of [{ seq: 42 }, { source: 'cam-2' }]) {
      const otherIds = other(changed);
      expect(otherIds.filter((id) => ids.includes(id)), JSON.stringify(changed)).toEqual([]);
    }
    const otherNode = logic.rowsFor({ ...root(frame), node: ocrNode, frame, output: detections }).map((r) => r.rowId);
    expect(otherNode.filter((id) => ids.includes(id))).toEqual([]);
    const otherApp = createAppLogic({ ...traffic, name: 'parking' }).rowsFor({ ...root(frame, 'parking'), node: detectNode, frame, output: detections }).map((r) => r.rowId);
    expect(otherApp.filter((id) => ids.includes(id))).toEqual([]);
  });

  it('writes the frames summary only for nodes fed by frames, and ids below the parent output', () => {
    const rows = logic.rowsFor({ ...child, node: detectNode, frame, output: detections });
    expect(rows.map((r) => r.table)).toEqual(['detections', 'detections', 'detections']);
    expect(rows[0]?.rowId).toBe('traffic/cam-1/41/detect/0/detect/0');
  });

  it('turns recognized texts into recognitions rows of kind text, with the number a text spells', () => {
    const output: NodeOutput = {
      kind: 'texts',
      texts: [
        { text: 'AB 123', score: 0.98765, box: { x1: 5.555, y1: 6, x2: 70, y2: 20 } },
        { text: 'STOP', score: 0.5, box: { x1: 100, y1: 100, x2: 150, y2: 120 } },
        { text: ' 1,250 ', score: 0.9, box: { x1: 0, y1: 0, x2: 10, y2: 10 } },
        { text: '-3.5', score: 0.9, box: { x1: 0, y1: 0, x2: 10, y2: 10 } },
      ],
    };
    const rows = logic.rowsFor({ ...child, node: ocrNode, frame, output });
    expect(rows.map((r) => r.table)).toEqual(['recognitions', 'recognitions', 'recognitions', 'recognitions']);
    expect(rows[0]?.fields.score).toBe(0.988);
    expect(rows[0]?.fields).toMatchObject({ kind: 'text', value: 'AB 123', number: 0, object_id: child.inputId, x1: 5.56, y1: 6, x2: 70, y2: 20, node: 'ocr', frame_seq: 41 });
    expect(rows[1]?.fields).toMatchObject({ value: 'STOP', score: 0.5 });
    expect(rows.slice(2).map((r) => r.fields.number)).toEqual([1250, -3.5]);
    expect(logic.rowsFor({ ...root(frame), node: ocrNode, frame, output })[0]?.fields.object_id).toBe('');
    expect(new Set(rows.map((r) => r.rowId)).size).toBe(4);
    expect(logic.rowsFor({ ...child, node: ocrNode, frame, output: { kind: 'texts', texts: [] } })).toEqual([]);
  });
});

describe('evenSloSplit', () => {
  it('splits the SLO evenly over a 3-stage chain', () => {
    const chain = app(`name: chain
sloMs: 900
nodes:
  - { id: a, model: m }
  - { id: b, model: m }
  - { id: c, model: m }
edges:
  - { from: frames, to: a }
  - { from: a, to: b }
  - { from: b, to: c }
`);
    expect(evenSloSplit(chain)).toEqual({ a: 300, b: 300, c: 300 });
  });

  it('gives a shorter branch the per-stage share of the deepest path', () => {
    const branch = app(`name: branch
sloMs: 900
nodes:
  - { id: detect, model: m }
  - { id: plate, model: m }
  - { id: ocr, model: m }
  - { id: face, model: m }
edges:
  - { from: frames, to: detect }
  - { from: detect, to: plate }
  - { from: plate, to: ocr }
  - { from: detect, to: face }
`);
    const split = evenSloSplit(branch);
    expect(split).toEqual({ detect: 300, plate: 300, ocr: 300, face: 300 });
    // No path from frames gets more than the SLO.
    expect((split.detect ?? 0) + (split.plate ?? 0) + (split.ocr ?? 0)).toBeLessThanOrEqual(900);
  });

  it('gives a two-stage app half each and a single-node app the whole SLO', () => {
    expect(evenSloSplit(traffic)).toEqual({ detect: 1000, ocr: 1000 });
    const single = app('name: one\nsloMs: 750\nnodes: [{ id: a, model: m }]\nedges: [{ from: frames, to: a }]\n');
    expect(evenSloSplit(single)).toEqual({ a: 750 });
  });

  it("forgets a quiet source's text changes with its tracking: the same id added again starts afresh, its first values told", () => {
    const hud = app(`name: hud
sloMs: 2000
nodes:
  - id: score
    model: ppocr-rec
    parse: { field: score, pattern: '(\\d+)' }
edges:
  - { from: frames, to: score }
`);
    const logic = createAppLogic(hud);
    const node = hud.nodes[0] as AppSpec['nodes'][number];
    const changes = (seq: number, text: string): unknown[] => {
      const at: FrameRef = { ...frame, source: 'stream', seq };
      const output: NodeOutput = { kind: 'texts', texts: [{ text, score: 0.9, box: { x1: 1, y1: 2, x2: 3, y2: 4 } }] };
      return logic.rowsFor({ node, frame: at, output, ...root(at, 'hud') }).filter((r) => r.table === 'events').map((r) => r.fields.value);
    };
    expect(changes(500, '10')).toEqual(['10']);
    expect(changes(501, '12')).toEqual(['12']);
    // Quiet past the idle time: forgotten. Run again from seq 0, its first score is news (it was taken for a stale frame before).
    logic.flushIdle(0);
    expect(changes(0, '12')).toEqual(['12']);
  });
});
