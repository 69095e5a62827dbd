/**
 * Hostile footage: a file that is not video, an empty one, and a playlist served over HTTP that
 * names a local file as its segment (what a source added over the API could point at). Each
 * fails its source with a reason; none reads a local file into the results. The playlist case
 * guards the ffmpeg in use: its HLS demuxer refuses a segment of another protocol.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, silentLogger, sourceSchema, type Frame } from '../../core/index.js';
import { createHlsStats, followHls } from '../../ingest/hls.js';
import { createFileSource, openFrameSource, resolveFfmpegPath, type FileSourceOptions } from '../../ingest/index.js';

const dir = mkdtempSync(join(tmpdir(), 'panoptes-hostile-footage-'));
const secret = join(dir, 'private.ts');
let server: Server;
let base = '';
/** Requests per path. */
const loads = new Map<string, number>();

beforeAll(async () => {
  const ffmpeg = (...args: string[]): Buffer => execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=64x48:rate=5', ...args]);
  ffmpeg('-t', '2', '-pix_fmt', 'yuv420p', '-f', 'mpegts', secret);
  // Metadata that reads like ffmpeg's own lines about the input: a duration of 3,000 h, a rate of 999,999 fps.
  ffmpeg('-frames:v', '5', '-pix_fmt', 'yuv420p', '-metadata', 'title=Duration: 3000:00:00.00', '-metadata', 'comment=Stream #9:9: Video: x 999999 fps', join(dir, 'lying.mp4'));
  // A title that reads like a decoding error, and the footage's clock leaping 1,000 s at frame 3 (the footage itself, no damage).
  ffmpeg('-frames:v', '6', '-pix_fmt', 'yuv420p', '-vf', 'setpts=if(gte(N\\,3)\\,PTS+1000/TB\\,PTS)', '-metadata', 'title=error while decoding', join(dir, 'leap.mkv'));
  writeFileSync(join(dir, 'garbage.mp4'), Buffer.from(Array.from({ length: 50_000 }, (_, i) => (i * 7919) % 256)));
  writeFileSync(join(dir, 'empty.mp4'), '');
  // 45 bytes of GIF whose screen is 16000×16000: a gigabyte to decode.
  const screen = Buffer.alloc(4);
  screen.writeUInt16LE(16000, 0);
  screen.writeUInt16LE(16000, 2);
  const image = Buffer.from([0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 1, 0, 0x3b]);
  writeFileSync(join(dir, 'vast.gif'), Buffer.concat([Buffer.from('GIF89a'), screen, Buffer.from([0x80, 0, 0, 0, 0, 0, 255, 255, 255]), image]));
  const playlist = ['#EXTM3U', '#EXT-X-VERSION:3', '#EXT-X-TARGETDURATION:2', '#EXTINF:2.0,', `file://${secret}`, '#EXT-X-ENDLIST', ''].join('\n');
  const media = (header: string[], segments = 1): string => ['#EXTM3U', ...header, ...Array.from({ length: segments }, (_, i) => `#EXTINF:2.0,\ns${i}.ts`), ''].join('\n');
  const served: Record<string, string> = {
    '/stolen.m3u8': playlist,
    // A master playlist whose variant is itself.
    '/self.m3u8': ['#EXTM3U', '#EXT-X-STREAM-INF:BANDWIDTH=1000,RESOLUTION=64x48', 'self.m3u8', ''].join('\n'),
    // A live playlist asking to be loaded again at once.
    '/eager.m3u8': media(['#EXT-X-TARGETDURATION:0']),
    '/overflow.m3u8': media(['#EXT-X-TARGETDURATION:2', '#EXT-X-MEDIA-SEQUENCE:9007199254740992', '#EXT-X-ENDLIST']),
    '/long.m3u8': media(['#EXT-X-TARGETDURATION:2'], 400_000),
    '/ended.m3u8': ['#EXTM3U', '#EXT-X-TARGETDURATION:2', '#EXTINF:2.0,', 'v0.ts', '#EXTINF:2.0,', 'v1.ts', '#EXT-X-ENDLIST', ''].join('\n'),
    // Ended after a prefetch segment that follows a discontinuity (undecided: maybe an ad's first).
    '/undecided.m3u8': ['#EXTM3U', '#EXT-X-TARGETDURATION:2', '#EXTINF:2.0,live', 'v0.ts', '#EXT-X-DISCONTINUITY', '#EXT-X-TWITCH-PREFETCH:v1.ts', '#EXT-X-ENDLIST', ''].join('\n'),
    // A session description: ffmpeg would listen on that UDP port, on every interface, for RTP anyone may send.
    '/cam.sdp': ['v=0', 'o=- 0 0 IN IP4 127.0.0.1', 's=cam', 'c=IN IP4 0.0.0.0', 't=0 0', 'm=video 45004 RTP/AVP 26', ''].join('\n'),
    '/v0.ts': 'segment 0;',
    '/v1.ts': 'segment 1;',
  };
  server = createServer((request, response) => {
    loads.set(request.url ?? '', (loads.get(request.url ?? '') ?? 0) + 1);
    const text = served[request.url ?? ''];
    // A segment that says it is 100 MB, and never sends it.
    if (request.url === '/s0.ts') response.writeHead(200, { 'content-length': String(100 << 20) }).flushHeaders();
    else if (request.url === '/vast.m3u8') response.writeHead(200, { 'content-length': String(20 << 20) }).flushHeaders();
    else if (request.url === '/trickle.ts') {
      // A real recording, ten bytes a second: never silent long enough for ffmpeg's own timeout.
      const bytes = readFileSync(secret);
      response.writeHead(200, { 'content-type': 'video/mp2t', 'content-length': String(bytes.length) });
      let sent = 0;
      const dribble = setInterval(() => response.write(bytes.subarray(sent, ++sent)), 100);
      response.on('close', () => clearInterval(dribble));
    }
    else if (text !== undefined) response.writeHead(200, { 'content-type': 'application/vnd.apple.mpegurl' }).end(text);
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

async function read(path: string, more: Partial<FileSourceOptions> = {}): Promise<{ frames: Frame[]; error: string | undefined }> {
  const source = createFileSource({ id: 'cam', path, speed: 'max', loop: false, ffmpegPath: resolveFfmpegPath(), logger: silentLogger(), ...more });
  const frames: Frame[] = [];
  try {
    for await (const frame of source.frames()) frames.push(frame);
    return { frames, error: undefined };
  } catch (err) {
    return { frames, error: (err as Error).message };
  }
}

describe('hostile footage', () => {
  it('a playlist over HTTP naming a local file reads nothing from it (ffmpeg refuses the segment)', async () => {
    const { frames, error } = await read(`${base}/stolen.m3u8`);
    expect(frames).toHaveLength(0);
    expect(error).toBeDefined();
    // The same segment read as a local file gives frames: it is the protocol change that is refused.
    expect((await read(secret)).frames.length).toBeGreaterThan(5);
  });

  it('metadata that reads like ffmpeg\'s duration, rate or decoding errors changes nothing: every frame is read and none owed', async () => {
    const lying = createFileSource({ id: 'cam', path: join(dir, 'lying.mp4'), speed: 'max', loop: false, ffmpegPath: resolveFfmpegPath(), logger: silentLogger() });
    const frames: Frame[] = [];
    for await (const frame of lying.frames()) frames.push(frame);
    expect(frames).toHaveLength(5);
    expect(lying.status()).toMatchObject({ expectedFrames: 5, shortfall: undefined });
    expect(lying.status().durationMs).toBeLessThan(2000);

    const leap = createFileSource({ id: 'cam', path: join(dir, 'leap.mkv'), speed: 'max', loop: false, ffmpegPath: resolveFfmpegPath(), logger: silentLogger() });
    const times: number[] = [];
    for await (const frame of leap.frames()) times.push(frame.ptsMs);
    expect(times).toHaveLength(6);
    expect(times[3]! - times[2]!).toBeGreaterThan(999_000);
    expect(leap.takeDamaged()).toEqual([]);
  });

  it('a playlist server cannot make the follower loop, poll without pause, count past 2^53, or hand it more than it can hold', async () => {
    const follow = async (path: string, forMs = 3000): Promise<{ error?: string; fed: number }> => {
      const stream = followHls({ url: `${base}${path}`, requestTimeoutMs: 2000 });
      let fed = 0;
      stream.on('data', (chunk: Buffer) => (fed += chunk.length));
      const ended = new Promise<string | undefined>((resolve) => {
        stream.on('error', (err) => resolve(err.message));
        stream.on('end', () => resolve(undefined));
      });
      const error = await Promise.race([ended, new Promise<string>((resolve) => setTimeout(() => resolve('still following'), forMs))]);
      stream.destroy();
      return { ...(error !== undefined && { error }), fed };
    };
    expect((await follow('/self.m3u8')).error).toMatch(/variant is a master playlist too/);
    expect(loads.get('/self.m3u8')).toBe(2);
    // Polled every half second at most, not a thousand times a second; its segment, 100 MB by its header, refused unread.
    expect(await follow('/eager.m3u8', 1600)).toEqual({ error: 'still following', fed: 0 });
    expect(loads.get('/eager.m3u8')).toBeLessThanOrEqual(4);
    expect(loads.get('/s0.ts')).toBe(1);
    expect((await follow('/overflow.m3u8')).error).toMatch(/media sequence number too large/);
    expect((await follow('/long.m3u8')).error).toMatch(/400000 segments: more than 100000/);
    // 20 MB by its header: refused before it is read.
    expect((await follow('/vast.m3u8')).error).toMatch(/HLS playlist .*: larger than 16777216 bytes/);
  });

  it('a live playlist that ended is not fed again by the next connection of its source: the source is offline', async () => {
    const stats = createHlsStats();
    const connection = async (): Promise<{ fed: string; error?: unknown }> => {
      const stream = followHls({ url: `${base}/ended.m3u8`, stats });
      let fed = '';
      stream.on('data', (chunk: Buffer) => (fed += chunk.toString()));
      const error = await new Promise<unknown>((resolve) => {
        stream.on('error', resolve);
        stream.on('end', () => resolve(undefined));
      });
      return { fed, ...(error !== undefined && { error }) };
    };
    expect(await connection()).toEqual({ fed: 'segment 0;segment 1;' });
    const again = await connection();
    expect(again.fed).toBe('');
    expect(again.error).toMatchObject({ code: ErrorCode.SourceOffline, message: expect.stringMatching(/the stream has ended \(EXT-X-ENDLIST\), nothing new after segment 1/) });
    expect(stats.segmentsFed).toBe(2);

    // A playlist that ended with an undecided prefetch segment ends too, without it.
    const undecided = followHls({ url: `${base}/undecided.m3u8`, stats: createHlsStats() });
    let fed = '';
    undecided.on('data', (chunk: Buffer) => (fed += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      undecided.on('end', resolve);
      undecided.on('error', reject);
    });
    expect(fed).toBe('segment 0;');
    expect(undecided.stats).toMatchObject({ segmentsFed: 1, segmentsMissed: 1 });
  });

  it('a recording served a byte at a time fails its source once no frame is decoded for the stall limit, its rate probe too', async () => {
    const startedAt = Date.now();
    const probed = await read(`${base}/trickle.ts`, { stallMs: 1500, fps: 5 });
    expect(probed.frames).toHaveLength(0);
    expect(probed.error).toMatch(/trickle\.ts.*reading the stream's parameters took over 1\.5 s: the server sends too little to decode/);
    const run = await read(`${base}/trickle.ts`, { stallMs: 1500 });
    expect(run.frames).toHaveLength(0);
    expect(run.error).toMatch(/trickle\.ts.*no frame decoded for 1\.5 s: the server sends too little to decode/);
    // Not the minutes the file would take at ten bytes a second.
    expect(Date.now() - startedAt).toBeLessThan(15_000);
  });

  it('a healthy stream that gives no sample for longer than the stall limit (a still scene sampled by scene change) is not a stall', async () => {
    const still = join(dir, 'still.ts');
    execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'color=c=gray:size=64x48:rate=5', '-t', '4', '-pix_fmt', 'yuv420p', '-f', 'mpegts', still]);
    // Decoded in real time (speed 1): 4 s with at most the first frame sampled.
    const { frames, error } = await read(still, { stallMs: 1500, speed: 1, sample: { sceneChange: 0.3 } });
    expect(error).toBeUndefined();
    expect(frames.length).toBeLessThanOrEqual(1);
  });

  it('a URL served as a session description fails its source instead of opening a UDP port for RTP, recorded or live', async () => {
    const recorded = await openFrameSource(sourceSchema.parse({ id: 'sdp', path: `${base}/cam.sdp`, apps: ['app'] }), dir, silentLogger());
    const frames: Frame[] = [];
    await expect((async () => {
      for await (const frame of recorded.frames()) frames.push(frame);
    })()).rejects.toThrow(/Protocol 'rtp' not on whitelist/);
    expect(frames).toHaveLength(0);
    // A live source tries again after a failure: its last error says why.
    const live = await openFrameSource(sourceSchema.parse({ id: 'sdp-live', path: `${base}/cam.sdp`, apps: ['app'], live: true }), dir, silentLogger());
    const reading = (async () => {
      for await (const frame of live.frames()) frames.push(frame);
    })();
    await expect.poll(() => (live.status() as { lastError?: string }).lastError, { timeout: 15_000 }).toMatch(/Protocol 'rtp' not on whitelist/);
    await live.stop();
    await reading;
    expect(frames).toHaveLength(0);
  });

  it('bytes that are not video, an empty file, and a GIF of 16000×16000 pixels fail their source naming the file', async () => {
    for (const name of ['garbage.mp4', 'empty.mp4', 'vast.gif']) {
      const { frames, error } = await read(join(dir, name));
      expect(frames, name).toHaveLength(0);
      expect(error, name).toContain(name);
    }
    // Refused before a picture is decoded (ffmpeg would otherwise allocate its gigabyte first).
    expect((await read(join(dir, 'vast.gif'))).error).toContain('a picture of 16000x16000 pixels, more than the 67108864 a frame may have');
  });
});
