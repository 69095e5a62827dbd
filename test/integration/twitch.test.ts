/**
 * The Twitch path end to end against a fake Twitch on 127.0.0.1 (GQL, usher and a live media
 * playlist of ffmpeg-made MPEG-TS segments, Twitch-shaped: program date-times, `live` titles,
 * prefetch segments, stitched ads of solid red): the real resolver and follower through
 * `createLiveSource`, with the secrets watched in the captured logs.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJpeg } from '../../analyzers/index.js';
import { encodeSegments } from './hls-segments.js';
import { createLogger, createMemoryBus, dropContract, ErrorCode, frameContract, silentLogger, sourceSchema, Topics, type Drop, type Frame, type Logger, type PanoptesError } from '../../core/index.js';
import { resolveTwitch, twitchConnect, type TwitchOptions } from '../../ingest/twitch.js';
import { createIngest, createLiveSource, type LiveSource } from '../../ingest/index.js';

const CLIENT_ID = 'client-5ecret-id';
const OAUTH_TOKEN = 'oauth-5ecret-token';
/** Every secret's marker: none may reach a log line or an error message. */
const SECRET = /5ecret/;
const CONTENT_SEGMENTS = 6;
const VARIANTS = [
  { group: 'chunked', name: '1080p60 (source)', resolution: '1920x1080', bandwidth: 6_000_000, fps: 60 },
  { group: '720p60', name: '720p60', resolution: '1280x720', bandwidth: 3_400_000, fps: 60 },
  { group: '480p30', name: '480p', resolution: '852x480', bandwidth: 1_400_000, fps: 30 },
  { group: '160p30', name: '160p', resolution: '284x160', bandwidth: 230_000, fps: 30 },
];

let dir: string;
const segments = new Map<string, Buffer>();

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'panoptes-twitch-'));
  const encode = (prefix: string, video: string, seconds: number): void => encodeSegments(dir, prefix, video, seconds);
  encode('c', 'testsrc=size=320x240:rate=10', CONTENT_SEGMENTS);
  encode('ad', 'color=c=red:size=320x240:rate=10', 1);
  for (const name of readdirSync(dir)) segments.set(name.replace(/\.ts$/, ''), readFileSync(join(dir, name)));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A fake Twitch: GQL hands out numbered tokens, usher a master playlist whose variants carry
 * the token, and the media playlist a live window of 1 s segments (one more each second), the
 * content looping with a discontinuity, ad breaks stitched in as Twitch does.
 */
async function fakeTwitch(options: { live?: boolean; adBreaks?: [start: number, length: number][] } = {}) {
  const state = {
    live: options.live ?? true,
    nullToken: false,
    usherRefuses: false,
    gql: [] as { headers: IncomingHttpHeaders; body: { operationName?: string; variables?: Record<string, unknown> } }[],
    usher: [] as URLSearchParams[],
    playlists: [] as string[],
    expiredTokens: new Set<number>(),
    adBreaks: options.adBreaks ?? [],
    /** Segments answered with 404. */
    lost: new Set<number>(),
  };
  const initial = 3;
  let liveSince = state.live ? Date.now() : undefined;
  const t0 = Math.floor(Date.now() / 1000) * 1000 + 3_600_000;
  const lastListed = (): number => initial - 1 + Math.floor((Date.now() - (liveSince ?? Date.now())) / 1000);
  const adBreakOf = (i: number): [number, number] | undefined => state.adBreaks.find(([start, length]) => i >= start && i < start + length);
  const kind = (i: number): string => (adBreakOf(i) ? 'ad' : 'live');
  const discontinuity = (i: number): boolean => i > 0 && (kind(i) !== kind(i - 1) || (kind(i) === 'live' && i % CONTENT_SEGMENTS === 0));
  const iso = (i: number): string => new Date(t0 + i * 1000).toISOString();

  const mediaPlaylist = (origin: string): string => {
    const last = lastListed();
    const first = Math.max(0, last - 4);
    const lines = ['#EXTM3U', '#EXT-X-VERSION:3', '#EXT-X-TARGETDURATION:1', `#EXT-X-MEDIA-SEQUENCE:${first}`, `#EXT-X-TWITCH-LIVE-SEQUENCE:${last}`];
    lines.push(`#EXT-X-DATERANGE:ID="playlist-session-1",CLASS="twitch-session",START-DATE="${iso(0)}",END-ON-NEXT=YES`);
    for (const [start, length] of state.adBreaks) {
      if (start <= last + 2 && start + length > first) {
        lines.push(`#EXT-X-DATERANGE:ID="stitched-ad-${start}-${length}",CLASS="twitch-stitched-ad",START-DATE="${iso(start)}",DURATION=${length}.000,X-TV-TWITCH-AD-ROLL-TYPE="MIDROLL"`);
      }
    }
    for (let i = first; i <= last; i++) {
      if (discontinuity(i)) lines.push('#EXT-X-DISCONTINUITY');
      lines.push(`#EXT-X-PROGRAM-DATE-TIME:${iso(i)}`, `#EXTINF:1.000,${kind(i) === 'ad' ? 'Amazon|8675309' : 'live'}`, `${origin}/seg/${i}.ts`);
    }
    for (const i of [last + 1, last + 2]) {
      if (discontinuity(i)) lines.push('#EXT-X-DISCONTINUITY');
      lines.push(`#EXT-X-TWITCH-PREFETCH:${origin}/seg/${i}.ts`);
    }
    return lines.join('\n') + '\n';
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (req.method === 'POST' && url.pathname === '/gql') {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        state.gql.push({ headers: req.headers, body: JSON.parse(body) as (typeof state.gql)[number]['body'] });
        const n = state.gql.length;
        const token = state.nullToken
          ? null
          : { value: JSON.stringify({ channel: 'somechannel', expires: 9_999_999_999, secret: `tok-5ecret-${n}` }), signature: `sig-5ecret-${n}`, __typename: 'PlaybackAccessToken' };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: { streamPlaybackAccessToken: token } }));
      });
      return;
    }
    const usher = /^\/api\/channel\/hls\/(\w+)\.m3u8$/.exec(url.pathname);
    if (usher) {
      state.usher.push(url.searchParams);
      if (state.usherRefuses) return void res.writeHead(403).end('[{"error":"Unauthorized","error_code":"unauthorized_entitlements"}]');
      if (!state.live) return void res.writeHead(404).end('[{"error":"twirp error not_found: transcode does not exist","error_code":"transcode_does_not_exist"}]');
      const n = Number(/sig-5ecret-(\d+)/.exec(url.searchParams.get('sig') ?? '')?.[1]);
      if (!n || !url.searchParams.get('token')?.includes(`tok-5ecret-${n}`)) return void res.writeHead(403).end('bad token');
      const lines = ['#EXTM3U', '#EXT-X-TWITCH-INFO:NODE="video-edge-fake",MANIFEST-NODE-TYPE="weaver_cluster"'];
      for (const v of VARIANTS) {
        lines.push(`#EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="${v.group}",NAME="${v.name}",AUTOSELECT=YES,DEFAULT=YES`);
        lines.push(`#EXT-X-STREAM-INF:BANDWIDTH=${v.bandwidth},RESOLUTION=${v.resolution},CODECS="avc1.4D401F,mp4a.40.2",VIDEO="${v.group}",FRAME-RATE=${v.fps}.000`);
        lines.push(`${origin}/weaver/${n}/${v.group}.m3u8`);
      }
      lines.push('#EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="audio_only",NAME="audio_only",AUTOSELECT=NO,DEFAULT=NO');
      lines.push('#EXT-X-STREAM-INF:BANDWIDTH=160000,CODECS="mp4a.40.2",VIDEO="audio_only"', `${origin}/weaver/${n}/audio_only.m3u8`);
      return void res.writeHead(200, { 'content-type': 'application/vnd.apple.mpegurl' }).end(lines.join('\n') + '\n');
    }
    const weaver = /^\/weaver\/(\d+)\/(\w+)\.m3u8$/.exec(url.pathname);
    if (weaver) {
      state.playlists.push(`${weaver[1]}/${weaver[2]}`);
      if (state.expiredTokens.has(Number(weaver[1])) || !state.live) return void res.writeHead(403).end('token expired');
      return void res.writeHead(200, { 'content-type': 'application/vnd.apple.mpegurl' }).end(mediaPlaylist(origin));
    }
    const segment = /^\/seg\/(\d+)\.ts$/.exec(url.pathname);
    if (segment) {
      const i = Number(segment[1]);
      if (state.lost.has(i)) return void res.writeHead(404).end();
      const bytes = segments.get(adBreakOf(i) ? 'ad0' : `c${i % CONTENT_SEGMENTS}`);
      return void res.writeHead(200, { 'content-type': 'video/mp2t' }).end(bytes);
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    state,
    options: { gqlUrl: `${origin}/gql`, usherUrl: origin, clientId: CLIENT_ID, oauthToken: `oauth:${OAUTH_TOKEN}` } satisfies Partial<TwitchOptions>,
    goLive(): void {
      state.live = true;
      liveSince = Date.now();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A logger whose JSON lines are kept. */
function capturedLogger(): { logger: Logger; lines: () => { level: number; msg: string; text: string }[] } {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger({ level: 'debug', destination });
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((text) => ({ ...(JSON.parse(text) as { level: number; msg: string }), text }));
  return { logger, lines };
}

/** Reads frames until `until` says so (or a deadline passes), then stops the source. */
async function collect(source: LiveSource, until: (frames: Frame[]) => boolean, deadlineMs = 25_000): Promise<Frame[]> {
  const frames: Frame[] = [];
  const deadline = setTimeout(() => void source.stop(), deadlineMs);
  try {
    for await (const frame of source.frames()) {
      frames.push(frame);
      if (until(frames)) break;
    }
  } finally {
    clearTimeout(deadline);
    await source.stop();
  }
  return frames;
}

async function isRed(frame: Frame): Promise<boolean> {
  const { data, width, height } = await decodeJpeg(frame.jpeg);
  let red = 0;
  for (let i = 0; i < data.length; i += 3) if (data[i]! > 160 && data[i + 1]! < 90 && data[i + 2]! < 90) red += 1;
  return red > (width * height) / 2;
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('resolveTwitch', () => {
  it('asks GQL and usher as the web player does, and picks the variant asked for', async () => {
    const twitch = await fakeTwitch();
    const signal = new AbortController().signal;
    try {
      const resolve = (quality: string) => resolveTwitch({ channel: 'SomeChannel', quality, ...twitch.options }, signal);
      expect((await resolve('best')).variant.name).toBe('1080p60 (source)');
      expect((await resolve('worst')).variant.name).toBe('160p');
      expect((await resolve('720')).variant.name).toBe('720p60');
      const chosen = await resolve('600p');
      expect(chosen.variant.name).toBe('480p');
      expect(chosen.mediaPlaylistUrl).toMatch(/\/weaver\/4\/480p30\.m3u8$/);

      const gql = twitch.state.gql[0]!;
      expect(gql.headers['client-id']).toBe(CLIENT_ID);
      expect(gql.headers.authorization).toBe(`OAuth ${OAUTH_TOKEN}`);
      expect(gql.body.operationName).toBe('PlaybackAccessToken_Template');
      expect(gql.body.variables).toMatchObject({ login: 'somechannel', isLive: true, isVod: false, playerType: 'site' });
      const usher = twitch.state.usher[0]!;
      expect(usher.get('sig')).toBe('sig-5ecret-1');
      expect(JSON.parse(usher.get('token')!)).toMatchObject({ secret: 'tok-5ecret-1' });
      expect(usher.get('allow_source')).toBe('true');
      expect(usher.get('fast_bread')).toBe('true');
      expect(usher.get('p')).toMatch(/^\d+$/);
    } finally {
      await twitch.close();
    }
  });

  it('says SourceOffline for usher 404 and for a null token; other refusals are errors, secrets left out', async () => {
    const twitch = await fakeTwitch({ live: false });
    const signal = new AbortController().signal;
    const failure = (options: Partial<TwitchOptions> = {}) =>
      resolveTwitch({ channel: 'somechannel', ...twitch.options, ...options }, signal).then(
        () => expect.unreachable(),
        (err: unknown) => err as PanoptesError,
      );
    try {
      const offline = await failure();
      expect(offline.code).toBe(ErrorCode.SourceOffline);
      expect(offline.message).toBe('twitch channel somechannel is offline (usher has no stream)');
      twitch.state.nullToken = true;
      expect((await failure()).code).toBe(ErrorCode.SourceOffline);
      twitch.state.nullToken = false;
      twitch.state.live = true;

      twitch.state.usherRefuses = true;
      const refused = await failure();
      expect(refused.code).toBe(ErrorCode.SourceUnavailable);
      expect(refused.message).toBe('twitch channel somechannel: usher: HTTP 403 Forbidden');
      // A GQL error echoing what it was sent, and GQL unreachable.
      const echo = await fakeGqlError(`bad client id ${CLIENT_ID} with ${OAUTH_TOKEN}`);
      const echoed = await failure({ gqlUrl: echo.url });
      await echo.close();
      expect(echoed.message).toBe('twitch channel somechannel: GQL playback token: bad client id <redacted> with <redacted>');
      const unreachable = await failure({ gqlUrl: echo.url });
      expect(unreachable.message).toBe('twitch channel somechannel: GQL playback token: ECONNREFUSED');
      for (const err of [offline, refused, echoed, unreachable]) expect(err.message).not.toMatch(SECRET);
    } finally {
      await twitch.close();
    }
  });
});

async function fakeGqlError(message: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ message }] })));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/gql`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('a Twitch channel as a live source', () => {
  it('streams the chosen variant, skips a stitched ad, and never logs a secret', async () => {
    // A 2 s mid-roll from the 7th second.
    const twitch = await fakeTwitch({ adBreaks: [[6, 2]] });
    const { logger, lines } = capturedLogger();
    const connect = twitchConnect({ channel: 'somechannel', quality: '480p', logger, ...twitch.options });
    const source = createLiveSource({ id: 'twitch', url: 'twitch:somechannel', connect, fps: 5, stallMs: 8000, logger });
    const startedAt = Date.now();
    try {
      // Until the playlist is well past the ad break.
      const frames = await collect(source, () => Date.now() - startedAt > 10_000);
      const red = (await Promise.all(frames.map(isRed))).filter(Boolean).length;
      console.log(`${frames.length} frames in ${Date.now() - startedAt} ms, ${red} red; stats ${JSON.stringify(connect.stats)}; status ${JSON.stringify(source.status())}`);
      expect(red).toBe(0);
      expect(connect.stats.adSegmentsSkipped).toBe(2);
      expect(connect.stats.segmentsFed).toBeGreaterThanOrEqual(7);
      // Content seconds fed at 5 fps (less what ffmpeg drops while probing), not more: no copies fill the ad's gap.
      expect(frames.length).toBeGreaterThanOrEqual(15);
      expect(frames.length).toBeLessThanOrEqual(connect.stats.segmentsFed * 5 + 2);
      expect(source.status().reconnects).toBe(0);
      expect(new Set(twitch.state.playlists.map((p) => p.split('/')[1]))).toEqual(new Set(['480p30']));
    } finally {
      await source.stop();
      await twitch.close();
    }
    const logged = lines();
    expect(logged.some((l) => l.msg === 'twitch stream resolved' && l.text.includes('"variant":"480p"'))).toBe(true);
    expect(logged.some((l) => l.msg === 'ad break: skipping its segments')).toBe(true);
    for (const line of logged) expect(line.text).not.toMatch(SECRET);
  }, 30_000);

  it('is offline, without an error storm, until the channel goes live; then waits out the pre-roll before starting ffmpeg', async () => {
    // A 6 s pre-roll, 4 s of it still to come when the source joins: longer than the stall
    // limit, so an ffmpeg started during it would be restarted.
    const twitch = await fakeTwitch({ live: false, adBreaks: [[0, 6]] });
    const { logger, lines } = capturedLogger();
    const connect = twitchConnect({ channel: 'somechannel', logger, ...twitch.options });
    const source = createLiveSource({ id: 'twitch', url: 'twitch:somechannel', connect, fps: 5, stallMs: 3500, offlineRetryMs: 300, logger });
    let wentLiveAt = 0;
    let offlineGqlCalls = 0;
    try {
      const watching = collect(source, (frames) => frames.length >= 5);
      await wait(2000);
      expect(source.status().state).toBe('offline');
      offlineGqlCalls = twitch.state.gql.length;
      wentLiveAt = Date.now();
      twitch.goLive();
      const frames = await watching;
      console.log(`offline for 2 s: ${offlineGqlCalls} GQL calls; first frame ${frames[0]!.captureTimeMs - wentLiveAt} ms after going live; stats ${JSON.stringify(connect.stats)}`);
      expect(frames).toHaveLength(5);
      expect((await Promise.all(frames.map(isRed))).filter(Boolean)).toHaveLength(0);
      // It joined 3 segments from the live edge: 4 of the 6 pre-roll segments were still to come.
      expect(connect.stats.adSegmentsSkipped).toBe(4);
      expect(source.status().reconnects).toBe(0);
    } finally {
      await source.stop();
      await twitch.close();
    }
    // One look every 300 ms: about 7 in 2 s, not a storm.
    expect(offlineGqlCalls).toBeGreaterThanOrEqual(3);
    expect(offlineGqlCalls).toBeLessThanOrEqual(10);
    const logged = lines();
    expect(logged.filter((l) => l.msg.startsWith('offline:'))).toHaveLength(1);
    expect(logged.filter((l) => l.level >= 40)).toEqual([]); // no warning or error while offline
    for (const line of logged) expect(line.text).not.toMatch(SECRET);
  }, 30_000);

  it('renews an expired token: the playlist answers 403, the source reconnects, GQL is asked again, frames go on', async () => {
    const twitch = await fakeTwitch();
    const { logger, lines } = capturedLogger();
    const connect = twitchConnect({ channel: 'somechannel', logger, ...twitch.options });
    const source = createLiveSource({ id: 'twitch', url: 'twitch:somechannel', connect, fps: 5, stallMs: 8000, backoff: { initialMs: 100, maxMs: 1000, jitter: 0.2 }, logger });
    let expiredAt = 0;
    try {
      const frames = await collect(source, (got) => {
        if (got.length === 5) {
          twitch.state.expiredTokens.add(1);
          expiredAt = Date.now();
        }
        return expiredAt > 0 && got.filter((f) => f.captureTimeMs > expiredAt).length >= 10;
      });
      const status = source.status();
      console.log(`${frames.length} frames; ${twitch.state.gql.length} GQL calls; status ${JSON.stringify(status)}`);
      expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i));
      expect(frames.filter((f) => f.captureTimeMs > expiredAt).length).toBeGreaterThanOrEqual(10);
      expect(twitch.state.gql.length).toBe(2);
      expect(twitch.state.playlists.filter((p) => p.startsWith('2/')).length).toBeGreaterThan(0);
      expect(status.reconnects).toBe(1);
      expect(status.lastError).toMatch(/HTTP 403/);
      expect(status.lastError).not.toMatch(SECRET);
    } finally {
      await source.stop();
      await twitch.close();
    }
    const logged = lines();
    expect(logged.some((l) => l.msg === 'live stream lost; reconnecting' && l.text.includes('HTTP 403'))).toBe(true);
    for (const line of logged) expect(line.text).not.toMatch(SECRET);
  }, 30_000);

  it('runs as a deployment source (`twitch:` in the config) through the ingest worker, with its ad figures', async () => {
    const twitch = await fakeTwitch({ adBreaks: [[4, 2]] });
    const bus = createMemoryBus();
    const { logger, lines } = capturedLogger();
    const published: Frame[] = [];
    const ingest = createIngest({ bus, dataDir: dir, logger });
    try {
      await bus.createTopics([{ name: Topics.frames, partitions: 1 }]);
      await bus.consumer({ groupId: 'reader', topics: [Topics.frames] }).run(async (batch) => {
        published.push(...batch.messages.map((m) => frameContract.decode(m.value)));
      });
      ingest.add(sourceSchema.parse({ id: 'streamer', twitch: { channel: 'somechannel', quality: '160p', ...twitch.options }, apps: ['game'], fps: 2 }));
      const startedAt = Date.now();
      while (Date.now() - startedAt < 25_000 && (ingest.metrics()[0]?.adSegmentsSkipped ?? 0) < 2) await wait(200);
      const [metrics] = ingest.metrics();
      expect(metrics).toMatchObject({ id: 'streamer', kind: 'live', adSegmentsSkipped: 2, segmentsMissed: 0 });
      expect(metrics!.published).toBeGreaterThan(0);
      expect(published.every((f) => f.source === 'streamer' && f.apps?.[0] === 'game')).toBe(true);
      expect(JSON.stringify(metrics)).not.toMatch(SECRET);
    } finally {
      await ingest.close();
      await bus.close();
      await twitch.close();
    }
    for (const line of lines()) expect(line.text).not.toMatch(SECRET);
  }, 30_000);

  it('records a segment that failed to download as a drop', async () => {
    const twitch = await fakeTwitch();
    const bus = createMemoryBus();
    const drops: Drop[] = [];
    const ingest = createIngest({ bus, dataDir: dir, logger: silentLogger() });
    try {
      await bus.createTopics([{ name: Topics.frames, partitions: 1 }, { name: Topics.drops, partitions: 1 }]);
      await bus.consumer({ groupId: 'reader', topics: [Topics.drops] }).run(async (batch) => {
        drops.push(...batch.messages.map((m) => dropContract.decode(m.value)));
      });
      // The follower starts three segments behind the live edge (prefetch segments count); segment 6 answers 404.
      twitch.state.lost.add(6);
      ingest.add(sourceSchema.parse({ id: 'streamer', twitch: { channel: 'somechannel', quality: '160p', ...twitch.options }, apps: ['game'], fps: 2 }));
      const startedAt = Date.now();
      while (Date.now() - startedAt < 25_000 && drops.length === 0) await wait(200);
      expect(ingest.metrics()[0]).toMatchObject({ segmentsMissed: 1 });
      expect(drops).toEqual([
        expect.objectContaining({ what: 'frame', where: 'ingest', why: 'segments-missed', source: 'streamer', detail: expect.stringMatching(/^1 segment of the live stream lost around frame [1-9]\d*: /) }),
      ]);
      expect(drops[0]!.frameSeq).toBeUndefined();
    } finally {
      await ingest.close();
      await bus.close();
      await twitch.close();
    }
  }, 30_000);
});
