import { afterEach, describe, expect, it } from 'vitest';
import { annotatedJpeg, decodeJpeg, encodeJpeg } from '../../analyzers/index.js';
import { createLiveView } from '../../cli/live-view.js';
import { Channels, createMemoryBus, silentLogger, Topics, type Bus, type ResultRow } from '../../core/index.js';

const grey = (width: number, height: number) => ({ width, height, data: new Uint8Array(width * height * 3).fill(128) });

const detection = (seq: number, cls: string, x1: number): ResultRow => ({
  app: 'traffic',
  table: 'detections',
  rowId: `d-${seq}-${cls}`,
  source: 'cam',
  fields: { frame_seq: seq, frame_time: 0, node: 'detect', class: cls, score: 0.9, x1, y1: 10, x2: x1 + 20, y2: 40, track_id: '', exit: '', cache_variant: '' },
});
const frameRow = (seq: number): ResultRow => ({ app: 'traffic', table: 'frames', rowId: `f-${seq}`, source: 'cam', fields: { frame_seq: seq, frame_time: 0, node: 'detect', width: 64, height: 48, objects: 1, class_counts: '{}', exit: '', cache_variant: '' } });

describe('the live view of a running pipeline', () => {
  let bus: Bus | undefined;
  afterEach(async () => bus?.close());

  it("keeps each source's newest analyzed frame with its objects, and passes events, drops and plans on", async () => {
    bus = createMemoryBus();
    await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan].map((name) => ({ name, partitions: 2 })));
    const view = createLiveView({ bus, logger: silentLogger() });
    const seen: string[] = [];
    view.subscribe((event) => seen.push(event.type));
    await view.start();
    const producer = bus.producer();
    const jpeg = await encodeJpeg(grey(64, 48));
    for (const seq of [1, 2]) await producer.send(Topics.frames, [Channels.frames.record({ source: 'cam', seq, captureTimeMs: 0, ptsMs: 0, width: 64, height: 48, jpeg })]);
    // A record nobody can read is skipped, not fatal.
    await producer.send(Topics.results, [{ key: 'cam', value: new Uint8Array([1, 2, 3]) }]);
    await producer.send(Topics.results, [detection(1, 'car', 0), frameRow(1), detection(2, 'person', 30), frameRow(2), detection(1, 'late', 5)].map((r) => Channels.results.record(r)));
    await producer.send(Topics.results, [Channels.results.record({ app: 'traffic', table: 'events', rowId: 'e', source: 'cam', fields: { frame_seq: 2, event: 'line_crossing', name: 'gate' } })]);
    await producer.send(Topics.drops, [Channels.drops.record({ what: 'frame', where: 'backend', why: 'deadline', source: 'cam', atMs: 0 })]);
    await producer.send(Topics.plan, [Channels.plan.record({ epoch: 3, createdAtMs: 0, sessions: [], backends: [], routing: [] })]);
    for (let i = 0; i < 200 && !seen.includes('plan'); i++) await new Promise((r) => setTimeout(r, 10));

    const latest = view.latestFrame('cam');
    expect(latest).toMatchObject({ source: 'cam', seq: 2, width: 64, height: 48, objects: [{ label: 'person 0.90', box: { x1: 30, y1: 10, x2: 50, y2: 40 } }] });
    expect(view.latestFrame('other')).toBeUndefined();
    expect(seen).toEqual(['frame', 'frame', 'event', 'drop', 'plan']);
    expect(view.plans().map((p) => p.epoch)).toEqual([3]);
    expect(view.counts()).toEqual({ rows: { detections: 3, frames: 2, events: 1 }, drops: 1 });
    // The source removed and added again: its frames count from 0 once more, and show.
    await producer.send(Topics.frames, [Channels.frames.record({ source: 'cam', seq: 0, captureTimeMs: 0, ptsMs: 0, width: 64, height: 48, jpeg })]);
    await producer.send(Topics.results, [Channels.results.record(detection(0, 'bus', 1)), Channels.results.record(frameRow(0))]);
    for (let i = 0; i < 200 && view.latestFrame('cam')?.seq !== 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(view.latestFrame('cam')).toMatchObject({ seq: 0, objects: [{ label: 'bus 0.90' }] });
    await view.close();
  });

  it('still shows frames when ingest runs far ahead of the models (a replay at full speed), keeping a bounded number', async () => {
    bus = createMemoryBus();
    await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan].map((name) => ({ name, partitions: 1 })));
    const view = createLiveView({ bus, logger: silentLogger() });
    const shown: number[] = [];
    view.subscribe((event) => event.type === 'frame' && shown.push(event.seq));
    await view.start();
    const producer = bus.producer();
    const jpeg = await encodeJpeg(grey(16, 16));
    await producer.send(Topics.frames, Array.from({ length: 500 }, (_, seq) => Channels.frames.record({ source: 'cam', seq, captureTimeMs: 0, ptsMs: 0, width: 16, height: 16, jpeg })));
    await producer.send(Topics.results, Array.from({ length: 500 }, (_, seq) => Channels.results.record(frameRow(seq))));
    for (let i = 0; i < 300 && view.counts().rows.frames !== 500; i++) await new Promise((r) => setTimeout(r, 10));
    expect(shown.length).toBeGreaterThan(10);
    expect(shown.at(-1)).toBeGreaterThan(400);
    expect(shown).toEqual([...shown].sort((a, b) => a - b));
    await view.close();
  });

  it('shows every source of a large deployment, and keeps frames in a bounded memory whatever source ids the bus carries', async () => {
    const jpeg = await encodeJpeg(grey(16, 16));
    const sources = Array.from({ length: 300 }, (_, i) => `s${i}`);
    const frames = (seq: number) => sources.map((source) => Channels.frames.record({ source, seq, captureTimeMs: 0, ptsMs: 0, width: 16, height: 16, jpeg }));
    const rowOf = (source: string, seq: number) => Channels.results.record({ ...frameRow(seq), rowId: `f-${source}-${seq}`, source });
    /** The sources whose frame 1 the view shows, when every camera's frame 2 (if `second`) came before the rows of frame 1. */
    const shown = async (second: boolean, keepBytes?: number): Promise<string[]> => {
      await bus?.close();
      bus = createMemoryBus();
      await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan].map((name) => ({ name, partitions: 1 })));
      const view = createLiveView({ bus, logger: silentLogger(), ...(keepBytes ? { keepBytes } : {}) });
      await view.start();
      const producer = bus.producer();
      await producer.send(Topics.frames, frames(1));
      if (second) await producer.send(Topics.frames, frames(2));
      // The view reads its topics in no fixed order: the last camera's last frame, shown, says every frame was read.
      const last = second ? 2 : 1;
      for (let i = 0; i < 100 && view.latestFrame('s299')?.seq !== last; i++) {
        await producer.send(Topics.results, [rowOf('s299', last)]);
        await new Promise((r) => setTimeout(r, 20));
      }
      const before = view.counts().rows.frames ?? 0;
      await producer.send(Topics.results, sources.slice(0, 299).map((source) => rowOf(source, 1)));
      for (let i = 0; i < 300 && view.counts().rows.frames !== before + 299; i++) await new Promise((r) => setTimeout(r, 10));
      const seen = sources.filter((source) => view.latestFrame(source)?.seq === 1);
      await view.close();
      return seen;
    };
    expect(await shown(true)).toEqual(sources.slice(0, 299));
    // Room for 100 frames: the sources heard from longest ago were let go.
    expect(await shown(false, 100 * jpeg.byteLength)).toEqual(sources.slice(200));

    // Each source's frame shown before the next comes: nothing waits, and the latest frames are held to the room as well.
    await bus?.close();
    bus = createMemoryBus();
    await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan].map((name) => ({ name, partitions: 1 })));
    const view = createLiveView({ bus, logger: silentLogger(), keepBytes: 50 * jpeg.byteLength });
    await view.start();
    const producer = bus.producer();
    for (const source of sources.slice(0, 100)) {
      await producer.send(Topics.frames, [Channels.frames.record({ source, seq: 1, captureTimeMs: 0, ptsMs: 0, width: 16, height: 16, jpeg })]);
      for (let i = 0; i < 100 && view.latestFrame(source)?.seq !== 1; i++) {
        await producer.send(Topics.results, [rowOf(source, 1)]);
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    expect(sources.filter((source) => view.latestFrame(source))).toEqual(sources.slice(50, 100));
    await view.close();
  });

  it('draws boxes and labels on a frame in native code; a label is text, never markup', async () => {
    const jpeg = await encodeJpeg(grey(200, 120));
    const drawn = await decodeJpeg(await annotatedJpeg(jpeg, [{ label: '<svg onload=alert(1)> & "car"', box: { x1: 40, y1: 40, x2: 160, y2: 110 } }]));
    expect([drawn.width, drawn.height]).toEqual([200, 120]);
    const at = (x: number, y: number): number[] => [...drawn.data.subarray((y * 200 + x) * 3, (y * 200 + x) * 3 + 3)];
    // The box's left edge is drawn; the middle of the box and the corner outside it keep their grey.
    expect(Math.abs(at(40, 80)[0]! - 128) + Math.abs(at(40, 80)[2]! - 128)).toBeGreaterThan(60);
    for (const [x, y] of [[100, 80], [5, 115]] as const) expect(at(x, y).every((v) => Math.abs(v - 128) < 12)).toBe(true);
    // Control characters and a label of any length draw as plain text, at once.
    const started = Date.now();
    const odd = await decodeJpeg(await annotatedJpeg(jpeg, [{ label: `car\u0000\u0001\ufffe 🚗 ${'x'.repeat(100_000)}`, box: { x1: 40, y1: 40, x2: 160, y2: 110 } }]));
    expect(odd.width).toBe(200);
    expect(Date.now() - started).toBeLessThan(5_000);
    // Nothing to draw: the frame as it was.
    const plain = await decodeJpeg(await annotatedJpeg(jpeg, []));
    expect(plain.width).toBe(200);
  });
});
