/**
 * An HLS follower: reads a live (or VOD) media playlist the way a player does and turns it into
 * one MPEG-TS byte stream for ffmpeg's stdin, with the ad segments cut out.
 *
 * Why not hand ffmpeg the playlist URL: ffmpeg's HLS demuxer cannot skip ads, and it would put
 * the playlist URL (for Twitch, a signed one) on its command line and in its error messages.
 *
 * Polling follows RFC 8216 §6.3.4: after a load that brought new segments, wait the target
 * duration (from when that load began); after an unchanged one, half of it. Twitch's low-latency
 * playlists (with prefetch segments) are polled every segment duration, as streamlink does.
 * Each segment is fetched once, in media-sequence order; a live playlist starts three segments
 * back from its live edge (RFC 8216 §6.3.3), a VOD (EXT-X-ENDLIST) at its start.
 *
 * Ad segments are skipped: Twitch's stitched ads (an EXT-X-DATERANGE of class
 * `twitch-stitched-ad` covering the segment's program date-time, or an EXTINF title other than
 * `live`) and SCTE-35 breaks (between EXT-X-CUE-OUT and EXT-X-CUE-IN). The timestamp jump that
 * leaves behind is ffmpeg's to smooth (`-dts_delta_threshold`, see live-source.ts).
 */
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { ErrorCode, PanoptesError, redactUrl, silentLogger, type Logger } from '../core/index.js';

/** Why a segment counts as an ad. */
export type AdReason =
  /** Inside a Twitch stitched-ad EXT-X-DATERANGE. */
  | 'daterange'
  /** A Twitch segment titled other than `live` (ads are titled `Amazon|...`). */
  | 'title'
  /** Between EXT-X-CUE-OUT and EXT-X-CUE-IN (SCTE-35). */
  | 'cue-out'
  /** A Twitch prefetch segment after a discontinuity: Twitch marks an ad's start that way. */
  | 'prefetch-discontinuity';

export interface HlsSegment {
  /** Media sequence number. */
  sequence: number;
  /** Absolute URL. */
  url: string;
  durationS: number;
  /** The EXTINF title, '' when none. */
  title: string;
  /** An EXT-X-DISCONTINUITY precedes it: timestamps or encoding may change here. */
  discontinuity: boolean;
  /** Wall-clock time of its first sample (EXT-X-PROGRAM-DATE-TIME, given or carried on), ms since epoch. */
  programDateTimeMs: number | undefined;
  /** Inside an SCTE-35 cue-out (EXT-X-CUE-OUT ... EXT-X-CUE-IN, or marked EXT-X-CUE-OUT-CONT). */
  cueOut: boolean;
  /** Why it is an ad; undefined for content. */
  ad: AdReason | undefined;
  /** A Twitch low-latency segment still being written (EXT-X-TWITCH-PREFETCH). */
  prefetch: boolean;
  /** Its initialization section (EXT-X-MAP), for fragmented MP4 segments. */
  mapUrl: string | undefined;
}

export interface HlsDateRange {
  id: string;
  class: string | undefined;
  startMs: number | undefined;
  /** From END-DATE, DURATION or PLANNED-DURATION; undefined while open-ended. */
  endMs: number | undefined;
  /** All attributes, unquoted. */
  attributes: Record<string, string>;
}

export interface HlsMediaPlaylist {
  targetDurationS: number;
  mediaSequence: number;
  /** EXT-X-ENDLIST: no segment will be added (a VOD, or a live stream that ended). */
  endList: boolean;
  /** In order, prefetch segments last. */
  segments: HlsSegment[];
  dateRanges: HlsDateRange[];
  /** Twitch's playlist (EXT-X-TWITCH-* tags or Twitch's segment titles): titles tell ads apart. */
  twitch: boolean;
}

export interface HlsVariant {
  /** Absolute URL of its media playlist. */
  url: string;
  bandwidth: number;
  width: number | undefined;
  height: number | undefined;
  frameRate: number | undefined;
  /** Twitch's name (`720p60`, `1080p60 (source)`) from EXT-X-MEDIA, else the VIDEO group, else `<height>p`. */
  name: string;
  /** No video: useless to a video pipeline (Twitch's `audio_only`). */
  audioOnly: boolean;
}

export interface ParseMediaOptions {
  /** The playlist starts inside an SCTE-35 cue-out (an earlier load saw it open before the first segment). */
  cueOutOpenAtStart?: boolean;
}

/** A playlist that is not one: the source's address is wrong, or the server answered something else. */
function badPlaylist(what: string): PanoptesError {
  return new PanoptesError(ErrorCode.SourceDecode, what, { retriable: true });
}

/** `KEY=VALUE,KEY="quoted, with commas"` → { KEY: VALUE, ... } (RFC 8216 §4.2). */
export function parseAttributes(list: string): Record<string, string> {
  const attributes: Record<string, string> = {};
  for (const m of list.matchAll(/([A-Z0-9-]+)=("[^"]*"|[^,]*)/g)) {
    const value = m[2] ?? '';
    attributes[m[1]!] = value.startsWith('"') ? value.slice(1, -1) : value;
  }
  return attributes;
}

function lines(text: string): string[] {
  const all = text.replace(/^\uFEFF/, '').split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '');
  if (all[0] !== '#EXTM3U') throw badPlaylist(`not an HLS playlist (it starts ${JSON.stringify((all[0] ?? '').slice(0, 40))})`);
  return all;
}

/** A master (multivariant) playlist lists variants rather than segments. */
export function isMasterPlaylist(text: string): boolean {
  return /^#EXT-X-STREAM-INF:/m.test(text);
}

function tagValue(line: string): string {
  return line.slice(line.indexOf(':') + 1);
}

function dateMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

function toDateRange(attributes: Record<string, string>): HlsDateRange {
  const startMs = dateMs(attributes['START-DATE']);
  const seconds = Number(attributes.DURATION ?? attributes['PLANNED-DURATION']);
  const endMs = dateMs(attributes['END-DATE']) ?? (startMs !== undefined && Number.isFinite(seconds) ? startMs + seconds * 1000 : undefined);
  return { id: attributes.ID ?? '', class: attributes.CLASS, startMs, endMs, attributes };
}

/** Twitch marks a stitched ad with its class, its id, or its X-TV-TWITCH-AD-* attributes (as streamlink reads them). */
export function isTwitchAdDateRange(range: HlsDateRange): boolean {
  return (
    range.class === 'twitch-stitched-ad' ||
    range.id.startsWith('stitched-ad-') ||
    Object.keys(range.attributes).some((key) => key.startsWith('X-TV-TWITCH-AD-'))
  );
}

function inRange(ms: number | undefined, range: HlsDateRange): boolean {
  if (ms === undefined || range.startMs === undefined) return false;
  return ms >= range.startMs && (range.endMs === undefined || ms < range.endMs);
}

/**
 * Parses a media playlist: its segments (with absolute URLs, sequence numbers, carried-on
 * program date-times and ad reasons) and the tags that matter for following it.
 * @param url the playlist's own URL (after redirects): relative segment URIs resolve against it
 * @throws PanoptesError SourceDecode for text that is not a media playlist, or encrypted segments
 */
export function parseMediaPlaylist(text: string, url: string, options: ParseMediaOptions = {}): HlsMediaPlaylist {
  if (isMasterPlaylist(text)) throw badPlaylist('a master playlist where a media playlist was expected');
  const playlist: HlsMediaPlaylist = { targetDurationS: 0, mediaSequence: 0, endList: false, segments: [], dateRanges: [], twitch: false };
  /** Tags that apply to the next segment. */
  let pending: { durationS?: number; title?: string; discontinuity?: boolean; programDateTimeMs?: number } = {};
  let nextDateMs: number | undefined;
  let cueOut = options.cueOutOpenAtStart ?? false;
  let mapUrl: string | undefined;
  const prefetchUris: { uri: string; discontinuity: boolean }[] = [];

  const addSegment = (uri: string, extra: Partial<HlsSegment>): void => {
    const durationS = pending.durationS ?? 0;
    const programDateTimeMs = pending.programDateTimeMs ?? nextDateMs;
    playlist.segments.push({
      sequence: playlist.mediaSequence + playlist.segments.length,
      url: new URL(uri, url).href,
      durationS,
      title: pending.title ?? '',
      discontinuity: pending.discontinuity ?? false,
      programDateTimeMs,
      cueOut,
      ad: undefined,
      prefetch: false,
      mapUrl,
      ...extra,
    });
    nextDateMs = programDateTimeMs === undefined ? undefined : programDateTimeMs + durationS * 1000;
    pending = {};
  };

  for (const line of lines(text)) {
    if (!line.startsWith('#')) {
      addSegment(line, {});
    } else if (line.startsWith('#EXTINF:')) {
      const value = tagValue(line);
      const comma = value.indexOf(',');
      pending.durationS = Number(comma < 0 ? value : value.slice(0, comma));
      pending.title = comma < 0 ? '' : value.slice(comma + 1).trim();
      if (!Number.isFinite(pending.durationS)) throw badPlaylist(`a segment duration that is not a number: ${line.slice(0, 60)}`);
    } else if (line.startsWith('#EXT-X-TARGETDURATION:')) {
      playlist.targetDurationS = Number(tagValue(line));
    } else if (line.startsWith('#EXT-X-MEDIA-SEQUENCE:')) {
      playlist.mediaSequence = Number(tagValue(line));
    } else if (line === '#EXT-X-ENDLIST') {
      playlist.endList = true;
    } else if (line === '#EXT-X-DISCONTINUITY') {
      pending.discontinuity = true;
    } else if (line.startsWith('#EXT-X-PROGRAM-DATE-TIME:')) {
      const ms = dateMs(tagValue(line));
      if (ms !== undefined) pending.programDateTimeMs = ms;
    } else if (line.startsWith('#EXT-X-DATERANGE:')) {
      playlist.dateRanges.push(toDateRange(parseAttributes(tagValue(line))));
    } else if (line.startsWith('#EXT-X-CUE-OUT-CONT') || line.startsWith('#EXT-X-CUE-OUT')) {
      // CONT repeats on each segment of a break, so a window that begins mid-break still knows.
      cueOut = true;
    } else if (line.startsWith('#EXT-X-CUE-IN')) {
      cueOut = false;
    } else if (line.startsWith('#EXT-X-MAP:')) {
      const uri = parseAttributes(tagValue(line)).URI;
      mapUrl = uri === undefined ? undefined : new URL(uri, url).href;
    } else if (line.startsWith('#EXT-X-KEY:')) {
      const method = parseAttributes(tagValue(line)).METHOD ?? 'NONE';
      if (method !== 'NONE') throw badPlaylist(`encrypted segments (EXT-X-KEY METHOD=${method}) are not supported`);
    } else if (line.startsWith('#EXT-X-TWITCH-PREFETCH:')) {
      prefetchUris.push({ uri: tagValue(line), discontinuity: pending.discontinuity ?? false });
      pending.discontinuity = false;
      playlist.twitch = true;
    } else if (line.startsWith('#EXT-X-TWITCH-')) {
      playlist.twitch = true;
    }
  }

  // Prefetch segments come last; they take the duration of the last full one, and a start time
  // carried on from it, so that a date range can still tell whether they are ads.
  const last = playlist.segments.at(-1);
  for (const { uri, discontinuity } of prefetchUris) {
    pending = { durationS: last?.durationS ?? playlist.targetDurationS, discontinuity };
    addSegment(uri, { prefetch: true, ad: discontinuity ? 'prefetch-discontinuity' : undefined });
  }

  playlist.twitch ||= playlist.segments.some((s) => s.title === 'live' || s.title.startsWith('Amazon'));
  const adRanges = playlist.dateRanges.filter(isTwitchAdDateRange);
  for (const segment of playlist.segments) {
    segment.ad ??= adRanges.some((range) => inRange(segment.programDateTimeMs, range))
      ? 'daterange'
      : playlist.twitch && !segment.prefetch && segment.title !== '' && segment.title !== 'live'
        ? 'title'
        : segment.cueOut
          ? 'cue-out'
          : undefined;
  }
  return playlist;
}

/**
 * Parses a master playlist's variants (EXT-X-STREAM-INF), named after their EXT-X-MEDIA video
 * rendition where there is one (Twitch's `720p60`).
 */
export function parseMasterPlaylist(text: string, url: string): HlsVariant[] {
  const videoNames = new Map<string, string>();
  const variants: HlsVariant[] = [];
  let pending: Record<string, string> | undefined;
  for (const line of lines(text)) {
    if (line.startsWith('#EXT-X-MEDIA:')) {
      const media = parseAttributes(tagValue(line));
      if (media.TYPE === 'VIDEO' && media['GROUP-ID'] && media.NAME) videoNames.set(media['GROUP-ID'], media.NAME);
    } else if (line.startsWith('#EXT-X-STREAM-INF:')) {
      pending = parseAttributes(tagValue(line));
    } else if (!line.startsWith('#') && pending) {
      const [width, height] = (pending.RESOLUTION ?? '').split('x').map(Number);
      const group = pending.VIDEO;
      const name = (group && videoNames.get(group)) ?? group ?? (height ? `${height}p` : `${pending.BANDWIDTH ?? 0}bps`);
      const namedHeight = Number(/(\d{3,4})p/.exec(name)?.[1]);
      const codecs = pending.CODECS;
      variants.push({
        url: new URL(line, url).href,
        bandwidth: Number(pending.BANDWIDTH ?? 0),
        width: width || undefined,
        height: height || namedHeight || undefined,
        frameRate: Number(pending['FRAME-RATE']) || undefined,
        name,
        audioOnly: !height && (/audio/i.test(name) || (codecs !== undefined && !/avc|hvc|hev|av01|vp0?[89]/i.test(codecs))),
      });
      pending = undefined;
    }
  }
  return variants;
}

/**
 * The variant to watch: `best` (highest resolution, then frame rate, then bandwidth), `worst`,
 * or a height (`720p`, `720`, `720p30`): that height, else the nearest lower one, else the
 * lowest. Audio-only variants and those over `maxBandwidth` (bits/s) are never chosen.
 * @returns undefined when no variant has video
 * @throws RangeError for a quality that is none of those
 */
export function chooseVariant(variants: readonly HlsVariant[], quality = 'best', maxBandwidth?: number): HlsVariant | undefined {
  const rank = (v: HlsVariant): number[] => [v.height ?? 0, v.frameRate ?? 0, v.bandwidth];
  const byRank = (a: HlsVariant, b: HlsVariant): number => {
    const [ra, rb] = [rank(a), rank(b)];
    const i = ra.findIndex((x, k) => x !== rb[k]);
    return i < 0 ? 0 : ra[i]! - rb[i]!;
  };
  const video = variants.filter((v) => !v.audioOnly && (maxBandwidth === undefined || v.bandwidth <= maxBandwidth)).sort(byRank);
  if (quality === 'best') return video.at(-1);
  if (quality === 'worst') return video[0];
  const wanted = /^(\d+)p?(\d+)?$/.exec(quality);
  if (!wanted) throw new RangeError(`quality: expected best, worst or a height such as 720p, got ${JSON.stringify(quality)}`);
  const [height, frameRate] = [Number(wanted[1]), wanted[2] === undefined ? Infinity : Number(wanted[2])];
  const fitting = video.filter((v) => (v.height ?? 0) <= height && (v.frameRate ?? 0) <= frameRate);
  return fitting.at(-1) ?? video[0];
}

/** Counters of a followed playlist; one object can be shared by the connections of a source. */
export interface HlsStats {
  playlistLoads: number;
  /** Segments whose bytes went into the stream. */
  segmentsFed: number;
  bytesFed: number;
  adSegmentsSkipped: number;
  adSecondsSkipped: number;
  /** Segments lost: gone from the playlist before they could be fetched, or failed to download. */
  segmentsMissed: number;
  /** Fed segments that follow a discontinuity. */
  discontinuities: number;
}

export function createHlsStats(): HlsStats {
  return { playlistLoads: 0, segmentsFed: 0, bytesFed: 0, adSegmentsSkipped: 0, adSecondsSkipped: 0, segmentsMissed: 0, discontinuities: 0 };
}

export interface FollowHlsOptions {
  /** A media playlist; or a master playlist, whose best video variant is followed. */
  url: string;
  /** Stops following; the stream then ends without an error. */
  signal?: AbortSignal;
  logger?: Logger;
  /** Sent with every playlist and segment request. */
  headers?: Record<string, string>;
  /** How the stream is named in logs and errors. @defaultValue the URL without its query string */
  label?: string;
  /** How many segments back from the live edge a live playlist starts. @defaultValue 3 */
  liveEdgeSegments?: number;
  /** Fetch Twitch's low-latency prefetch segments as soon as they are listed. @defaultValue true */
  lowLatency?: boolean;
  /** Counters to add to. @defaultValue new ones */
  stats?: HlsStats;
  /** Time limit of each playlist or segment request. @defaultValue 10000 */
  requestTimeoutMs?: number;
}

/**
 * The followed playlist's MPEG-TS bytes. Ends at EXT-X-ENDLIST; fails (a PanoptesError naming
 * the redacted playlist URL and the HTTP status) when the playlist can't be loaded. Events:
 * `'ad-skipped'` (the {@link HlsSegment}) for each ad segment left out.
 *
 * One reader: when the stream it is piped into goes away (ffmpeg died), following stops.
 */
class HlsStream extends Readable {
  readonly stats: HlsStats;
  readonly #stop: () => void;
  readonly #destinations = new Set<NodeJS.WritableStream>();
  #wantMore: (() => void) | undefined;
  #settleReady!: (err?: Error) => void;
  readonly #ready = new Promise<void>((resolve, reject) => {
    this.#settleReady = (err) => (err ? reject(err) : resolve());
  });

  constructor(stats: HlsStats, stop: () => void) {
    super({ highWaterMark: 1 << 20 });
    this.stats = stats;
    this.#stop = stop;
    this.#ready.catch(() => undefined); // a rejection is also the stream's error; nobody need ask
    // The reader attaches its error listener only once it starts (ffmpeg spawns asynchronously);
    // a failure before that must not crash the process. Readers still see it.
    this.on('error', () => undefined);
  }

  /**
   * Resolves once there is content to read, or the stream has ended; so a Twitch pre-roll ad
   * break passes before ffmpeg is started. Rejects with the stream's error.
   */
  ready(): Promise<void> {
    return this.#ready;
  }

  override _read(): void {
    const wake = this.#wantMore;
    this.#wantMore = undefined;
    wake?.();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#stop();
    // A failure ends what the stream is piped into: ffmpeg blocked reading its stdin ignores the
    // SIGTERM fluent-ffmpeg sends on an input error until it reads an end of file.
    if (err) for (const destination of this.#destinations) destination.end();
    this.#settleReady(err ?? undefined);
    this._read();
    callback(err);
  }

  override pipe<T extends NodeJS.WritableStream>(destination: T, options?: { end?: boolean }): T {
    this.#destinations.add(destination);
    return super.pipe(destination, options);
  }

  override unpipe(destination?: NodeJS.WritableStream): this {
    if (destination) this.#destinations.delete(destination);
    else this.#destinations.clear();
    super.unpipe(destination);
    // Piping unpipes when the destination closes or fails: nobody reads the live stream any more.
    if (!this.destroyed && this.listenerCount('data') === 0) this.destroy();
    return this;
  }

  /** The follower's: queues bytes; resolves when the reader wants more (backpressure) or the stream is gone. */
  async feed(bytes: Buffer): Promise<void> {
    if (this.destroyed) return;
    const wantsMore = this.push(bytes);
    this.#settleReady();
    if (!wantsMore && !this.destroyed) await new Promise<void>((resolve) => (this.#wantMore = resolve));
  }

  /** The follower's: no more bytes will come. */
  finish(): void {
    if (this.destroyed) return;
    this.push(null);
    this.#settleReady();
  }
}

export type { HlsStream };

/** Follows an HLS playlist; see {@link HlsStream}. */
export function followHls(options: FollowHlsOptions): HlsStream {
  const stopped = new AbortController();
  const stream = new HlsStream(options.stats ?? createHlsStats(), () => stopped.abort());
  const stop = (): void => void stream.destroy();
  options.signal?.addEventListener('abort', stop, { once: true });
  if (options.signal?.aborted) stop();
  follow(options, stream, stopped.signal)
    .then(
      () => stream.finish(),
      (err: unknown) => stream.destroy(stopped.signal.aborted ? undefined : (err as Error)),
    )
    .finally(() => options.signal?.removeEventListener('abort', stop));
  return stream;
}

async function follow(options: FollowHlsOptions, stream: HlsStream, signal: AbortSignal): Promise<void> {
  const label = options.label ?? redactUrl(options.url);
  const logger = (options.logger ?? silentLogger()).child({ module: 'ingest.hls', playlist: label });
  const liveEdge = options.liveEdgeSegments ?? 3;
  const lowLatency = options.lowLatency ?? true;
  const stats = stream.stats;
  const http = { signal, label, headers: options.headers ?? {}, timeoutMs: options.requestTimeoutMs ?? 10_000 };
  let url = options.url;
  let previous: HlsMediaPlaylist | undefined;
  /** The next media sequence number to feed or skip. */
  let next: number | undefined;
  let map: string | undefined;
  let adBreak: { reason: AdReason; segments: number; seconds: number } | undefined;

  while (!signal.aborted) {
    const loadStartedAt = Date.now();
    const { text, finalUrl } = await fetchPlaylist(url, http);
    if (isMasterPlaylist(text)) {
      if (previous) throw badPlaylist(`HLS playlist ${label}: a master playlist where its media playlist was`);
      const variant = chooseVariant(parseMasterPlaylist(text, finalUrl));
      if (!variant) throw badPlaylist(`HLS playlist ${label}: a master playlist without a video variant`);
      logger.info({ variant: variant.name, bandwidth: variant.bandwidth }, 'following the best variant of a master playlist');
      url = variant.url;
      continue;
    }
    let playlist = parseMediaPlaylist(text, finalUrl);
    // A break whose EXT-X-CUE-OUT has slid out of the window is still open before its first segment.
    const before = previous?.segments.find((s) => s.sequence === playlist.mediaSequence - 1);
    if (before?.cueOut) playlist = parseMediaPlaylist(text, finalUrl, { cueOutOpenAtStart: true });
    previous = playlist;
    stats.playlistLoads += 1;

    const segments = playlist.segments.filter((s) => lowLatency || !s.prefetch);
    const lastSequence = segments.at(-1)?.sequence ?? playlist.mediaSequence - 1;
    if (next === undefined) {
      next = playlist.endList ? playlist.mediaSequence : Math.max(playlist.mediaSequence, lastSequence + 1 - liveEdge);
      logger.info({ live: !playlist.endList, startSequence: next, targetDurationS: playlist.targetDurationS }, 'following HLS playlist');
    } else if (lastSequence < next - 1 - segments.length) {
      // Numbering went back by more than a window: a restarted stream; a new connection starts it cleanly.
      throw badPlaylist(`HLS playlist ${label}: media sequence went back from ${next - 1} to ${lastSequence} (the stream restarted)`);
    }
    const fresh = segments.filter((s) => s.sequence >= next!);
    const missed = (fresh[0]?.sequence ?? next) - next;
    if (missed > 0) {
      stats.segmentsMissed += missed;
      logger.warn({ missed, from: next }, 'segments left the playlist before they were fetched');
    }

    let changed = false;
    for (const segment of fresh) {
      if (signal.aborted) return;
      // An undecided prefetch segment (maybe an ad's first) waits until it is listed in full.
      if (segment.prefetch && segment.ad) break;
      changed = true;
      if (segment.ad) {
        next = segment.sequence + 1;
        if (!adBreak) logger.info({ reason: segment.ad, sequence: segment.sequence }, 'ad break: skipping its segments');
        adBreak ??= { reason: segment.ad, segments: 0, seconds: 0 };
        adBreak.segments += 1;
        adBreak.seconds += segment.durationS;
        stats.adSegmentsSkipped += 1;
        stats.adSecondsSkipped += segment.durationS;
        stream.emit('ad-skipped', segment);
        continue;
      }
      if (adBreak) logger.info({ skippedSegments: adBreak.segments, skippedS: Math.round(adBreak.seconds * 10) / 10 }, 'ad break over');
      adBreak = undefined;
      const bytes = await fetchSegment(segment, http, logger);
      if (signal.aborted) return;
      if (!bytes) {
        // A prefetch segment not there yet is tried again when it is listed in full.
        if (segment.prefetch) break;
        next = segment.sequence + 1;
        stats.segmentsMissed += 1;
        continue;
      }
      next = segment.sequence + 1;
      if (segment.mapUrl && segment.mapUrl !== map) {
        const init = await fetchSegment({ ...segment, url: segment.mapUrl }, http, logger);
        if (!init) throw badPlaylist(`HLS playlist ${label}: its initialization section (EXT-X-MAP) could not be fetched`);
        await stream.feed(init);
        map = segment.mapUrl;
      }
      if (segment.discontinuity) stats.discontinuities += 1;
      stats.segmentsFed += 1;
      stats.bytesFed += bytes.length;
      await stream.feed(bytes);
    }
    if (playlist.endList && next > lastSequence) {
      logger.info({ segmentsFed: stats.segmentsFed }, 'HLS playlist ended (EXT-X-ENDLIST)');
      return;
    }

    const targetS = playlist.targetDurationS || segments.at(-1)?.durationS || 2;
    const lowLatencyS = segments.some((s) => s.prefetch) ? segments.filter((s) => !s.prefetch).at(-1)?.durationS : undefined;
    const waitS = lowLatencyS ?? (changed ? targetS : targetS / 2);
    const waitMs = loadStartedAt + waitS * 1000 - Date.now();
    if (waitMs > 0) await delay(waitMs, undefined, { signal }).catch(() => undefined);
  }
}

interface HttpContext {
  signal: AbortSignal;
  label: string;
  headers: Record<string, string>;
  timeoutMs: number;
}

/**
 * Why a request failed, without its URL: undici's messages for a malformed URL quote it, and a
 * Twitch URL carries a signed token.
 */
function requestFailure(err: unknown): string {
  const cause = err instanceof Error ? (err.cause as { code?: unknown } | undefined) : undefined;
  return typeof cause?.code === 'string' ? cause.code : err instanceof Error ? err.name : 'request failed';
}

/**
 * A request whose answer `read` takes in, all under the request time limit; a PanoptesError
 * naming `what` and the HTTP status when it fails. (A timer of our own rather than
 * AbortSignal.any: on Node 20 signals combined with a long-lived one are kept until it ends.)
 */
export async function httpRequest<T>(
  url: string,
  what: string,
  http: Omit<HttpContext, 'label'>,
  read: (response: Response) => Promise<T>,
  init: { method?: 'GET' | 'POST'; body?: string } = {},
): Promise<T> {
  const request = new AbortController();
  const abort = (): void => request.abort(http.signal.reason);
  http.signal.addEventListener('abort', abort, { once: true });
  const timer = setTimeout(() => request.abort(), http.timeoutMs);
  try {
    const response = await fetch(url, { ...init, headers: http.headers, signal: request.signal });
    if (!response.ok) {
      await response.body?.cancel().catch(() => undefined);
      throw new PanoptesError(ErrorCode.SourceUnavailable, `${what}: HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`, {
        retriable: true,
        details: { what, status: response.status },
      });
    }
    return await read(response);
  } catch (err) {
    if (err instanceof PanoptesError || http.signal.aborted) throw err;
    const reason = request.signal.aborted
      ? `no answer within ${http.timeoutMs} ms`
      : err instanceof SyntaxError
        ? 'an answer that is not JSON'
        : requestFailure(err);
    throw new PanoptesError(ErrorCode.SourceUnavailable, `${what}: ${reason}`, { retriable: true, details: { what } });
  } finally {
    clearTimeout(timer);
    http.signal.removeEventListener('abort', abort);
  }
}

async function fetchPlaylist(url: string, http: HttpContext): Promise<{ text: string; finalUrl: string }> {
  return httpRequest(url, `HLS playlist ${http.label}`, http, async (response) => ({ text: await response.text(), finalUrl: response.url || url }));
}

/** A segment's bytes, or undefined (logged) when it could not be fetched. */
async function fetchSegment(segment: HlsSegment, http: HttpContext, logger: Logger): Promise<Buffer | undefined> {
  try {
    return await httpRequest(segment.url, `HLS segment ${segment.sequence} of ${http.label}`, http, async (response) => Buffer.from(await response.arrayBuffer()));
  } catch (err) {
    if (http.signal.aborted) return undefined;
    logger.warn({ sequence: segment.sequence, prefetch: segment.prefetch }, `segment not fetched: ${(err as Error).message}`);
    return undefined;
  }
}
