/**
 * The app logic's operators wired from config: a tracking node's rows carry track ids, its lines
 * and zones make events, each track that ends makes a `track` event with what its descendants
 * found, and `flush` ends what is still in view.
 */
import { describe, expect, it } from 'vitest';
import { APP_TABLES, createAppLogic } from '../../apps/index.js';
import { appSpecSchema, checkAppGraph, frameId, outputId, parseConfig, type AppSpec, type Detection, type FrameRef, type NodeOutput, type ResultRow } from '../../core/index.js';
import { rowProblem } from '../../sinks/schema.js';

const spec = parseConfig(appSpecSchema, `name: lobby
sloMs: 2000
nodes:
  - id: people
    model: centernet
    track: { minIou: 0.2, maxMissedFrames: 1, minFrames: 2, sameClass: false, classes: [person, car] }
    lines:
      - { name: door, from: { x: 0, y: 0.5 }, to: { x: 1, y: 0.5 }, directions: { positive: out, negative: in }, anchor: center, margin: 0 }
    zones:
      - { name: desk, polygon: [{ x: 0, y: 0 }, { x: 0.5, y: 0 }, { x: 0.5, y: 1 }, { x: 0, y: 1 }], anchor: center, minDwellMs: 500 }
  - id: faces
    model: centernet
  - id: attributes
    model: centernet
edges:
  - { from: frames, to: people }
  - { from: people, to: faces }
  - { from: faces, to: attributes }
`, 'lobby.yaml') as AppSpec;
const [people, faces, attributes] = spec.nodes as [AppSpec['nodes'][number], AppSpec['nodes'][number], AppSpec['nodes'][number]];

const frameAt = (seq: number): FrameRef => ({ source: 'cam', seq, captureTimeMs: 0, mediaTimeMs: seq * 1000, width: 100, height: 100 });
const box = (x1: number, y1: number): Detection['box'] => ({ x1, y1, x2: x1 + 20, y2: y1 + 20 });
const person = (x1: number, y1: number, className = 'person', score = 0.9): Detection => ({ box: box(x1, y1), classId: 0, className, score });
const detected = (...detections: Detection[]): NodeOutput => ({ kind: 'detections', detections });

function rootRows(logic: ReturnType<typeof createAppLogic>, seq: number, output: NodeOutput): ResultRow[] {
  return logic.rowsFor({ node: people, frame: frameAt(seq), output, inputId: frameId('lobby', 'cam', seq), root: true });
}
const events = (rows: ResultRow[]): Record<string, unknown>[] => rows.filter((r) => r.table === 'events').map((r) => ({ ...r.fields, rowId: r.rowId }));

describe('app logic with track, lines and zones', () => {
  it('tracks across frames, counts the line crossing once, and ends the track with its dwell', () => {
    const logic = createAppLogic(spec);
    // A person walks down the left half, crossing y = 50 between frames 2 and 3; a bag (not tracked) sits still.
    const bag = { box: box(80, 80), classId: 24, className: 'backpack', score: 0.8 };
    const frames = [
      detected(person(10, 15), bag),
      detected(person(10, 25), bag),
      detected(person(10, 35), bag),
      detected(person(10, 45), bag),
      detected(bag),
      detected(bag),
    ];
    const rows = frames.flatMap((output, seq) => rootRows(logic, seq, output));
    const detections = rows.filter((r) => r.table === 'detections');
    expect(detections.filter((r) => r.fields.class === 'person').map((r) => r.fields.track_id)).toEqual(['0-0', '0-0', '0-0', '0-0']);
    expect(detections.filter((r) => r.fields.class === 'backpack').map((r) => r.fields.track_id)).toEqual(Array(6).fill(''));

    expect(events(rows)).toEqual([
      { frame_seq: 3, frame_time: 3000, node: 'people', event: 'line_crossing', name: 'door', track_id: '0-0', class: 'person', direction: 'in', value: '', previous: '', duration_ms: 0, snapshot: '', rowId: 'lobby/cam/3/line_crossing/people/door/0-0/in' },
      // Missed on frames 4 and 5 (maxMissedFrames 1): it ends on 5, inside the desk zone all along.
      { frame_seq: 0, frame_time: 0, node: 'people', event: 'dwell', name: 'desk', track_id: '0-0', class: 'person', direction: '', value: '', previous: '', duration_ms: 3000, snapshot: '', rowId: 'lobby/cam/0/dwell/people/desk/0-0' },
      { frame_seq: 0, frame_time: 0, node: 'people', event: 'track', name: 'people', track_id: '0-0', class: 'person', direction: '', value: '{"frames":4,"seen":{}}', previous: '', duration_ms: 3000, snapshot: '', rowId: 'lobby/cam/0/track/people/0-0' },
    ]);
    for (const row of rows) expect(rowProblem(APP_TABLES.find((t) => t.name === row.table)!, row)).toBeUndefined();
    expect(logic.flush()).toEqual([]);
  });

  it('gives a track the class with the most score, and writes no track seen on fewer than minFrames frames', () => {
    const logic = createAppLogic(spec);
    rootRows(logic, 0, detected(person(60, 10, 'car', 0.4), person(10, 80)));
    rootRows(logic, 1, detected(person(60, 12, 'person', 0.9)));
    rootRows(logic, 2, detected(person(60, 14, 'car', 0.4)));
    const flushed = logic.flush().map((r) => r.fields);
    // 0.9 for person against 0.8 for car; the one-frame track at (10, 80) is not written.
    expect(flushed).toEqual([expect.objectContaining({ event: 'track', track_id: '0-0', class: 'person', duration_ms: 2000 })]);
  });

  it('gathers what descendants find on a tracked object into its track event, and gives their rows its track id', () => {
    const logic = createAppLogic(spec);
    const personId = (seq: number): string => outputId(frameId('lobby', 'cam', seq), 'people', 0);
    const faceId = (seq: number): string => outputId(personId(seq), 'faces', 0);
    const readings = [
      [{ name: 'age', value: '30', number: 30, score: 1 }, { name: 'gender', value: 'female', number: 0, score: 0.9 }, { name: 'identity', value: 'person-2', number: 0, score: 0.9 }],
      [{ name: 'age', value: '34', number: 34, score: 1 }, { name: 'gender', value: 'male', number: 0, score: 0.6 }, { name: 'identity', value: 'person-5', number: 0, score: 1 }],
      [{ name: 'age', value: '70', number: 70, score: 1 }, { name: 'gender', value: 'female', number: 0, score: 0.8 }, { name: 'identity', value: 'person-2', number: 0, score: 0.85 }],
    ];
    const childRows: ResultRow[] = [];
    for (let seq = 0; seq < 3; seq++) {
      rootRows(logic, seq, detected(person(10, 10 + seq)));
      // A face on the person in every frame; two on frame 0 count as one frame with a face.
      const found = seq === 0 ? detected(person(12, 12, 'face'), person(13, 13, 'face')) : detected(person(12, 12, 'face'));
      childRows.push(...logic.rowsFor({ node: faces, frame: frameAt(seq), output: found, inputId: personId(seq), root: false }));
      childRows.push(...logic.rowsFor({ node: attributes, frame: frameAt(seq), output: { kind: 'attributes', attributes: readings[seq]! }, inputId: faceId(seq), root: false }));
    }
    expect(new Set(childRows.map((r) => r.fields.track_id))).toEqual(new Set(['0-0']));
    const age = childRows.find((r) => r.table === 'recognitions' && r.fields.name === 'age')!;
    expect(age.fields).toMatchObject({ kind: 'attribute', value: '30', number: 30, object_id: faceId(0), node: 'attributes' });
    expect(age.rowId).toBe(outputId(faceId(0), 'attributes', 0));
    for (const row of childRows) expect(rowProblem(APP_TABLES.find((t) => t.name === row.table)!, row)).toBeUndefined();

    const track = logic.flush().find((r) => r.fields.event === 'track');
    // Median age 34; gender by score: female 1.7 against male 0.6; identity by score: person-2 1.75 against person-5 1.
    expect(JSON.parse(String(track!.fields.value))).toEqual({ frames: 3, seen: { faces: 3, attributes: 3 }, age: 34, gender: 'female', identity: 'person-2' });
  });

  it("writes a track's event again when a descendant's result on it arrives after the track ended, over the first", () => {
    const logic = createAppLogic(spec);
    const personId = (seq: number): string => outputId(frameId('lobby', 'cam', seq), 'people', 0);
    rootRows(logic, 0, detected(person(10, 10)));
    rootRows(logic, 1, detected(person(10, 11)));
    // The face on frame 1 is found in time; frame 0's attributes are still on their way when the person leaves.
    logic.rowsFor({ node: faces, frame: frameAt(1), output: detected(person(12, 12, 'face')), inputId: personId(1), root: false });
    rootRows(logic, 2, detected());
    const finalRows = rootRows(logic, 3, detected());
    const first = events(finalRows).find((e) => e.event === 'track');
    expect(first).toMatchObject({ event: 'track', track_id: '0-0', value: '{"frames":2,"seen":{"faces":1}}' });
    const late = logic.rowsFor({
      node: attributes,
      frame: frameAt(0),
      output: { kind: 'attributes', attributes: [{ name: 'age', value: '41', number: 41, score: 1 }, { name: 'identity', value: 'person-3', number: 0, score: 0.9 }] },
      inputId: outputId(personId(0), 'faces', 0),
      root: false,
    });
    expect(late.filter((r) => r.table === 'recognitions')).toHaveLength(2);
    expect(events(late)).toEqual([{ ...first, value: '{"frames":2,"seen":{"faces":1,"attributes":1},"age":41,"identity":"person-3"}' }]);
    // The second version is the later one by its version, whichever message reaches the store first.
    const versionOf = (rows: ResultRow[]): number | undefined => rows.find((r) => r.fields.event === 'track')?.versionMs;
    expect(versionOf(late)).toBeGreaterThan(versionOf(finalRows)!);
    // An empty result adds nothing and writes nothing again.
    expect(events(logic.rowsFor({ node: faces, frame: frameAt(0), output: detected(), inputId: personId(0), root: false }))).toEqual([]);
  });

  it('counts the frames a descendant saw a long-lived track in, each once, a result delivered again long after included', () => {
    const logic = createAppLogic(spec);
    const personId = (seq: number): string => outputId(frameId('lobby', 'cam', seq), 'people', 0);
    for (let seq = 0; seq < 500; seq++) {
      rootRows(logic, seq, detected(person(10, 10)));
      // Two faces on each frame are one frame with a face.
      logic.rowsFor({ node: faces, frame: frameAt(seq), output: detected(person(12, 12, 'face'), person(13, 13, 'face')), inputId: personId(seq), root: false });
    }
    // Frame 3's face again, 500 frames on (a redelivery): counted already.
    logic.rowsFor({ node: faces, frame: frameAt(3), output: detected(person(12, 12, 'face')), inputId: personId(3), root: false });
    const track = logic.flush().find((r) => r.fields.event === 'track');
    expect(JSON.parse(String(track!.fields.value))).toMatchObject({ frames: 500, seen: { faces: 500 } });
  });

  it('writes what a source no frame has come from for a while holds, and forgets it', () => {
    const logic = createAppLogic(spec);
    rootRows(logic, 0, detected(person(10, 10)));
    rootRows(logic, 1, detected(person(10, 11)));
    expect(logic.flushIdle(60_000)).toEqual([]);
    const held = logic.flushIdle(0);
    expect(events(held).map((e) => [e.event, e.track_id])).toEqual([
      ['dwell', '0-0'],
      ['track', '0-0'],
    ]);
    // Forgotten: nothing left to flush at the end.
    expect(logic.flush()).toEqual([]);
    expect(logic.flushIdle(0)).toEqual([]);
  });

  it('keeps one tracker per source', () => {
    const logic = createAppLogic(spec);
    rootRows(logic, 0, detected(person(10, 10)));
    const other = logic.rowsFor({ node: people, frame: { ...frameAt(0), source: 'cam-2' }, output: detected(person(10, 10)), inputId: frameId('lobby', 'cam-2', 0), root: true });
    rootRows(logic, 1, detected(person(10, 11)));
    logic.rowsFor({ node: people, frame: { ...frameAt(1), source: 'cam-2' }, output: detected(person(10, 11)), inputId: frameId('lobby', 'cam-2', 1), root: true });
    expect(other.find((r) => r.table === 'detections')!.fields.track_id).toBe('0-0');
    expect(logic.flush().filter((r) => r.fields.event === 'track').map((r) => [r.source, r.fields.track_id])).toEqual([['cam', '0-0'], ['cam-2', '0-0']]);
  });
});

describe('app spec checks for operators', () => {
  const models = { centernet: { task: 'detect-objects' }, 'ppocr-rec': { task: 'recognize-text' } };
  const check = (yaml: string): string[] => checkAppGraph(parseConfig(appSpecSchema, yaml, 'x.yaml') as AppSpec, models).map((i) => `${i.path}: ${i.message}`);

  it('refuses lines or zones without track, track on a non-detector or on a node fed crops, and duplicate names', () => {
    expect(check(`name: a
sloMs: 100
nodes:
  - id: d
    model: centernet
    lines: [{ name: l, from: { x: 0, y: 0.5 }, to: { x: 1, y: 0.5 } }, { name: l, from: { x: 0, y: 0.2 }, to: { x: 1, y: 0.2 } }]
  - id: r
    model: ppocr-rec
    track: {}
  - id: e
    model: centernet
    track: {}
edges: [{ from: frames, to: d }, { from: d, to: r }, { from: d, to: e }]
`)).toEqual([
      'nodes[0].lines: node "d" has lines but no `track`; lines count tracked objects',
      'nodes[0].lines[1].name: duplicate name "l"',
      'nodes[1].track: node "r" runs ppocr-rec (recognize-text); track follows detections: use a detector',
      'nodes[1].track: node "r" is fed crops by "d"; only a node fed by "frames" (and nothing else) can track',
      'nodes[2].track: node "e" is fed crops by "d"; only a node fed by "frames" (and nothing else) can track',
    ]);
  });

  it('refuses a line of no length and a zone of fewer than three corners, naming the key', () => {
    const parse = (node: string): string => {
      try {
        parseConfig(appSpecSchema, `name: a\nsloMs: 100\nnodes:\n  - id: d\n    model: centernet\n    track: {}\n${node}\nedges: [{ from: frames, to: d }]\n`, 'x.yaml');
        return 'parsed';
      } catch (err) {
        return String((err as Error).message);
      }
    };
    expect(parse('    lines: [{ name: l, from: { x: 0.5, y: 0.5 }, to: { x: 0.5, y: 0.5 } }]')).toMatch(/nodes\.0\.lines\.0\.to.*two different points|nodes\[0\]\.lines\[0\]\.to.*two different points/);
    expect(parse('    zones: [{ name: z, polygon: [{ x: 0, y: 0 }, { x: 1, y: 1 }] }]')).toMatch(/polygon/);
  });
});
