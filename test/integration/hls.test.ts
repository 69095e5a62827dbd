/**
 * The HLS follower against live-updating playlists served on 127.0.0.1: first byte-level (tiny
 * text "segments", so the order, the once-only fetches, the live-edge start, the reload cadence,
 * ad skipping and failures read plainly), then end to end: MPEG-TS segments made by ffmpeg, an
 * SCTE-35 ad break of solid red between a testsrc part and a blue part whose timestamps jump,
 * through `createLiveSource` with `fps` sampling.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJpeg } from '../../analyzers/index.js';
import { encodeSegments } from './hls-segments.js';
import { ErrorCode, PanoptesError, type Frame } from '../../core/index.js';
import { followHls, type HlsStream } from '../../ingest/hls.js';
import type { HlsSegment } from '../../ingest/hls-playlist.js';
import { createLiveSource } from '../../ingest/index.js';

interface Entry {
  name: string;
  durationS: number;
  /** Tags before its EXTINF. */
  tags?: string[];
}

interface LivePlaylistOptions {
  /** Entries listed at the first request. */
  initial: number;
  /** One more entry is listed every this many ms (0: one more on every playlist request). */
  stepMs: number;
  window: number;
  /** EXT-X-ENDLIST once every entry is listed. */
  endList: boolean;
}

/** Serves `/live.m3u8` (a sliding window over `entries`, published over time) and `/seg/<name>`. */
async function hlsServer(entries: Entry[], segments: Map<string, Buffer>, options: LivePlaylistOptions) {
  const requests: { path: string; atMs: number }[] = [];
  let startedAt: number | undefined;
  let playlistLoads = 0;
  let status = 200;
  const listed = (): number => {
    startedAt ??= Date.now();
    const step = options.stepMs === 0 ? playlistLoads - 1 : Math.floor((Date.now() - startedAt) / options.stepMs);
    return Math.min(entries.length, options.initial + step);
  };
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    requests.push({ path, atMs: Date.now() });
    if (path === '/master.m3u8') {
      const master = ['#EXTM3U', '#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=320x180', 'low.m3u8', '#EXT-X-STREAM-INF:BANDWIDTH=2000000,RESOLUTION=1280x720', 'live.m3u8'];
      return void res.writeHead(200).end(master.join('\n') + '\n');
    }
    if (path === '/live.m3u8') {
      playlistLoads += 1;
      if (status !== 200) return void res.writeHead(status).end('no');
      const n = listed();
      const first = Math.max(0, n - options.window);
      const lines = ['#EXTM3U', '#EXT-X-VERSION:3', `#EXT-X-TARGETDURATION:${Math.ceil(Math.max(...entries.map((e) => e.durationS)))}`, `#EXT-X-MEDIA-SEQUENCE:${first}`];
      for (const entry of entries.slice(first, n)) lines.push(...(entry.tags ?? []), `#EXTINF:${entry.durationS.toFixed(3)},`, `seg/${entry.name}`);
      if (options.endList && n === entries.length) lines.push('#EXT-X-ENDLIST');
      res.writeHead(200, { 'content-type': 'application/vnd.apple.mpegurl' }).end(lines.join('\n') + '\n');
      return;
    }
    const bytes = segments.get(path.replace('/seg/', ''));
    if (!bytes) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'video/mp2t' }).end(bytes);
  };
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/live.m3u8`,
    requests,
    playlistRequests: () => requests.filter((r) => r.path === '/live.m3u8'),
    segmentRequests: () => requests.filter((r) => r.path.startsWith('/seg/')).map((r) => r.path.slice(5)),
    answer: (code: number) => (status = code),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())).then(() => undefined),
  };
}

/** Reads a stream to its end (or error), as text. */
async function readAll(stream: HlsStream): Promise<{ text: string; error?: unknown }> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return { text: Buffer.concat(chunks).toString() };
  } catch (error) {
    return { text: Buffer.concat(chunks).toString(), error };
  }
}

const textSegments = (names: string[]): Map<string, Buffer> => new Map(names.map((n) => [n, Buffer.from(`${n};`)]));

describe('followHls (byte level)', () => {
  it('starts 3 segments from the live edge, feeds each segment once in order, skips a cue-out break, ends at ENDLIST', async () => {
    const entries: Entry[] = [
      ...['c0', 'c1', 'c2', 'c3', 'c4', 'c5'].map((name) => ({ name, durationS: 1 })),
      { name: 'ad6', durationS: 1, tags: ['#EXT-X-CUE-OUT:DURATION=2', '#EXT-X-DISCONTINUITY'] },
      { name: 'ad7', durationS: 1, tags: ['#EXT-X-CUE-OUT-CONT:ElapsedTime=1,Duration=2'] },
      { name: 'c8', durationS: 1, tags: ['#EXT-X-CUE-IN', '#EXT-X-DISCONTINUITY'] },
      { name: 'c9', durationS: 1 },
    ];
    const server = await hlsServer(entries, textSegments(entries.map((e) => e.name)), { initial: 5, stepMs: 200, window: 10, endList: true });
    try {
      const skipped: HlsSegment[] = [];
      const stream = followHls({ url: server.url });
      stream.on('ad-skipped', (segment: HlsSegment) => skipped.push(segment));
      const { text, error } = await readAll(stream);
      expect(error).toBeUndefined();
      expect(text).toBe('c2;c3;c4;c5;c8;c9;');
      expect(server.segmentRequests()).toEqual(['c2', 'c3', 'c4', 'c5', 'c8', 'c9']);
      expect(skipped.map((s) => [s.sequence, s.ad])).toEqual([
        [6, 'cue-out'],
        [7, 'cue-out'],
      ]);
      expect(stream.stats).toMatchObject({ segmentsFed: 6, adSegmentsSkipped: 2, adSecondsSkipped: 2, segmentsMissed: 0, discontinuities: 1 });
      expect(stream.stats.playlistLoads).toBe(server.playlistRequests().length);
    } finally {
      await server.close();
    }
  });

  it('reads a VOD from its start, the best variant of a master playlist, each initialization section (EXT-X-MAP) once', async () => {
    const entries: Entry[] = ['v0', 'v1', 'v2', 'v3', 'v4', 'v5'].map((name) => ({ name, durationS: 2 }));
    entries[0]!.tags = ['#EXT-X-MAP:URI="seg/init1"'];
    entries[3]!.tags = ['#EXT-X-MAP:URI="seg/init2"'];
    const server = await hlsServer(entries, textSegments([...entries.map((e) => e.name), 'init1', 'init2']), { initial: 6, stepMs: 1000, window: 10, endList: true });
    try {
      expect((await readAll(followHls({ url: server.url.replace('live.m3u8', 'master.m3u8') }))).text).toBe('init1;v0;v1;v2;init2;v3;v4;v5;');
      expect(server.playlistRequests()).toHaveLength(1);
      expect(server.requests.some((r) => r.path === '/low.m3u8')).toBe(false);
    } finally {
      await server.close();
    }
  });

  it('reloads at the target duration while the playlist changes, at half of it while it does not (RFC 8216 §6.3.4)', async () => {
    const names = Array.from({ length: 40 }, (_, i) => `s${i}`);
    const changing = await hlsServer(names.map((name) => ({ name, durationS: 1 })), textSegments(names), { initial: 3, stepMs: 0, window: 5, endList: false });
    const still = await hlsServer(names.slice(0, 3).map((name) => ({ name, durationS: 1 })), textSegments(names), { initial: 3, stepMs: 0, window: 5, endList: false });
    const stop = new AbortController();
    try {
      const streams = [followHls({ url: changing.url, signal: stop.signal }), followHls({ url: still.url, signal: stop.signal })];
      const reading = streams.map(readAll);
      await new Promise((resolve) => setTimeout(resolve, 3300));
      stop.abort();
      await Promise.all(reading);
      // Gaps as the server sees them (request arrivals), so a few ms either way; medians.
      const gaps = (loads: { atMs: number }[]): number[] => loads.slice(1).map((l, i) => l.atMs - loads[i]!.atMs);
      const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      const changingGaps = gaps(changing.playlistRequests());
      const stillGaps = gaps(still.playlistRequests());
      expect(changingGaps.length).toBeGreaterThanOrEqual(2);
      expect(median(changingGaps)).toBeGreaterThanOrEqual(950);
      expect(median(changingGaps)).toBeLessThan(1300);
      // The first reload follows a load that brought segments: a full target duration.
      expect(stillGaps[0]).toBeGreaterThanOrEqual(950);
      expect(median(stillGaps.slice(1))).toBeGreaterThanOrEqual(450);
      expect(median(stillGaps.slice(1))).toBeLessThan(800);
      expect(stillGaps.length).toBeGreaterThanOrEqual(3);
    } finally {
      stop.abort();
      await Promise.all([changing.close(), still.close()]);
    }
  });

  it('fails with an error naming the playlist (without its query) and the HTTP status when the playlist is refused', async () => {
    const names = ['a', 'b', 'c', 'd'];
    const server = await hlsServer(names.map((name) => ({ name, durationS: 1 })), textSegments(names), { initial: 3, stepMs: 0, window: 5, endList: false });
    try {
      const stream = followHls({ url: `${server.url}?token=s3cr3t-token&sig=s3cr3t-sig` });
      const reading = readAll(stream);
      await stream.ready();
      server.answer(403);
      const { text, error } = await reading;
      expect(text).toBe('a;b;c;');
      expect(error).toBeInstanceOf(PanoptesError);
      expect((error as PanoptesError).code).toBe(ErrorCode.SourceUnavailable);
      expect((error as PanoptesError).details.status).toBe(403);
      expect((error as Error).message).toBe(`HLS playlist ${server.url}?<redacted>: HTTP 403 Forbidden`);
    } finally {
      await server.close();
    }
  });

  it('fetches no further ahead than its reader reads, and stops once the stream it is piped into goes away', async () => {
    const names = Array.from({ length: 30 }, (_, i) => `big${i}`);
    const segments = new Map(names.map((n) => [n, Buffer.alloc(512 * 1024, 0x47)]));
    const server = await hlsServer(names.map((name) => ({ name, durationS: 1 })), segments, { initial: 30, stepMs: 0, window: 30, endList: true });
    try {
      const stream = followHls({ url: server.url, liveEdgeSegments: 30 });
      await stream.ready();
      await new Promise((resolve) => setTimeout(resolve, 500));
      // Nobody reads: a megabyte of buffer, one segment waiting on it, nothing more.
      expect(server.segmentRequests().length).toBeLessThanOrEqual(4);

      let received = 0;
      const reader = new Writable({
        write(chunk: Buffer, _encoding, done) {
          received += chunk.length;
          // Slow reader; it goes away (as ffmpeg's stdin does when ffmpeg dies) after 2 MB.
          if (received > 2 * 1024 * 1024) reader.destroy();
          else setTimeout(done, 5);
        },
      });
      stream.pipe(reader);
      await new Promise((resolve) => reader.once('close', resolve));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(stream.destroyed).toBe(true);
      const fetched = server.requests.length;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(server.requests.length).toBe(fetched);
      expect(server.segmentRequests().length).toBeLessThan(10);
    } finally {
      await server.close();
    }
  });
});

describe('followHls into a live source (ffmpeg, fps sampling)', () => {
  let dir: string;
  const segments = new Map<string, Buffer>();

  const encode = (prefix: string, video: string, seconds: number, tsOffsetS: number): void => encodeSegments(dir, prefix, video, seconds, tsOffsetS);

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'panoptes-hls-'));
    encode('a', 'testsrc=size=320x240:rate=10', 4, 0);
    encode('ad', 'color=c=red:size=320x240:rate=10', 3, 0);
    // After the break, testsrc under a blue box over most of the frame. The break is 3 s and the
    // programme's clock ran on meanwhile: a 3 s jump, below ffmpeg's default 10 s threshold, so
    // only the live source's `-dts_delta_threshold 1` keeps fps from filling it with copies.
    encode('b', 'testsrc=size=320x240:rate=10,drawbox=x=0:y=0:w=320:h=200:color=blue:t=fill', 4, 7);
    for (const name of readdirSync(dir)) segments.set(name.replace(/\.ts$/, ''), readFileSync(join(dir, name)));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The colour most of the frame is: the ad is red, the part after it mostly blue. */
  async function colourOf(frame: Frame): Promise<'red' | 'blue' | 'testsrc'> {
    const { data, width, height } = await decodeJpeg(frame.jpeg);
    let red = 0;
    let blue = 0;
    for (let i = 0; i < data.length; i += 3) {
      const [r, g, b] = [data[i]!, data[i + 1]!, data[i + 2]!];
      if (r > 160 && g < 90 && b < 90) red += 1;
      if (b > 160 && r < 90 && g < 90) blue += 1;
    }
    const pixels = width * height;
    return red > pixels / 2 ? 'red' : blue > pixels / 2 ? 'blue' : 'testsrc';
  }

  it('emits the content around an ad break, no frame of the ad, and no flood of copies across the discontinuity', async () => {
    const entries: Entry[] = [
      ...[0, 1, 2, 3].map((i) => ({ name: `a${i}`, durationS: 1 })),
      ...[0, 1, 2].map((i) => ({ name: `ad${i}`, durationS: 1, tags: i === 0 ? ['#EXT-X-CUE-OUT:DURATION=3', '#EXT-X-DISCONTINUITY'] : [] })),
      ...[0, 1, 2, 3].map((i) => ({ name: `b${i}`, durationS: 1, tags: i === 0 ? ['#EXT-X-CUE-IN', '#EXT-X-DISCONTINUITY'] : [] })),
    ];
    expect(segments.size).toBe(11);
    const server = await hlsServer(entries, segments, { initial: 3, stepMs: 500, window: 6, endList: true });
    let connections = 0;
    let stream: HlsStream | undefined;
    const source = createLiveSource({
      id: 'hls',
      url: 'hls-test',
      fps: 5,
      stallMs: 8000,
      backoff: { initialMs: 100, maxMs: 1000, jitter: 0.2 },
      connect: async (signal) => {
        // One broadcast: once it has ended, the "channel" is offline.
        if (connections++ > 0) throw new PanoptesError(ErrorCode.SourceOffline, 'the test broadcast is over');
        stream = followHls({ url: server.url, signal });
        await stream.ready();
        return stream;
      },
    });
    const watchdog = setInterval(() => {
      if (source.status().state === 'offline') void source.stop();
    }, 100);
    const deadline = setTimeout(() => void source.stop(), 25_000);
    const startedAt = Date.now();
    const frames: Frame[] = [];
    try {
      for await (const frame of source.frames()) frames.push(frame);
    } finally {
      clearInterval(watchdog);
      clearTimeout(deadline);
      await source.stop();
      await server.close();
    }
    const colours = await Promise.all(frames.map(colourOf));
    const count = (c: string): number => colours.filter((x) => x === c).length;
    console.log(`${frames.length} frames in ${Date.now() - startedAt} ms: ${count('testsrc')} testsrc, ${count('blue')} blue, ${count('red')} red; stats ${JSON.stringify(stream?.stats)}`);
    expect(server.segmentRequests().sort()).toEqual(['a0', 'a1', 'a2', 'a3', 'b0', 'b1', 'b2', 'b3']);
    expect(count('red')).toBe(0);
    // 4 s of each part at 5 fps. (With `-fflags nobuffer`, which live sources use for URLs only,
    // ffmpeg dropped what it read while probing: 10 of these 20 frames were lost.)
    expect(count('testsrc')).toBeGreaterThanOrEqual(17);
    expect(count('testsrc')).toBeLessThanOrEqual(22);
    // A fill of the 3 s jump would add 15 copies of the last frame.

    expect(count('blue')).toBeGreaterThanOrEqual(17);
    expect(count('blue')).toBeLessThanOrEqual(22);
    expect(colours.indexOf('blue')).toBe(count('testsrc')); // in order: the first part, then the second
    expect(stream?.stats).toMatchObject({ segmentsFed: 8, adSegmentsSkipped: 3, adSecondsSkipped: 3, segmentsMissed: 0, discontinuities: 1 });
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i));
  }, 30_000);
});
