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
 * Ad segments (`./hls-playlist.ts` says which) are skipped. The timestamp jump that leaves
 * behind is ffmpeg's to smooth (`-dts_delta_threshold`, see live-source.ts).
 */
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { ErrorCode, PanoptesError, redactUrl, silentLogger, type Logger } from '../core/index.js';
import { badPlaylist, chooseVariant, isMasterPlaylist, parseMasterPlaylist, parseMediaPlaylist, type AdReason, type HlsMediaPlaylist, type HlsSegment } from './hls-playlist.js';
import { httpRequest, MAX_SEGMENT_BYTES, MAX_TEXT_BYTES, readBody, type HttpContext } from './http.js';

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
  /**
   * The media sequence number of the last segment fed or skipped: a new connection of the same
   * source goes on after it while the playlist still lists it, rather than feed it again.
   */
  lastSequence?: number;
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
  let viaMaster = false;
  const fedBefore = stats.segmentsFed;
  /** The next media sequence number to feed or skip. */
  let next: number | undefined;
  let map: string | undefined;
  let adBreak: { reason: AdReason; segments: number; seconds: number } | undefined;

  while (!signal.aborted) {
    const loadStartedAt = Date.now();
    const { text, finalUrl } = await fetchPlaylist(url, http);
    if (isMasterPlaylist(text)) {
      if (previous) throw badPlaylist(`HLS playlist ${label}: a master playlist where its media playlist was`);
      // One hop: a variant that is itself a master playlist (or this one again) would be followed for ever.
      if (viaMaster) throw badPlaylist(`HLS playlist ${label}: its variant is a master playlist too`);
      viaMaster = true;
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
      const taken = stats.lastSequence;
      const resumes = taken !== undefined && taken >= playlist.mediaSequence - 1 && taken <= lastSequence;
      const liveStart = Math.max(playlist.mediaSequence, lastSequence + 1 - liveEdge);
      // A live stream goes on from the live edge at most: what came out while it was away is missed, not fed at decode speed as if live now.
      next = resumes ? (playlist.endList ? taken + 1 : Math.max(taken + 1, liveStart)) : playlist.endList ? playlist.mediaSequence : liveStart;
      if (resumes && next > taken + 1) stats.segmentsMissed += next - (taken + 1);
      logger.info({ live: !playlist.endList, startSequence: next, resumes, targetDurationS: playlist.targetDurationS }, 'following HLS playlist');
    } else if (lastSequence < next - 1 - segments.length) {
      // Numbering went back by more than a window: a restarted stream; a new connection starts it cleanly.
      throw badPlaylist(`HLS playlist ${label}: media sequence went back from ${next - 1} to ${lastSequence} (the stream restarted)`);
    }
    const fresh = segments.filter((s) => s.sequence >= next!);
    const missed = (fresh[0]?.sequence ?? next) - next;
    if (missed > 0) {
      stats.segmentsMissed += missed;
      stats.lastSequence = next + missed - 1;
      logger.warn({ missed, from: next }, 'segments left the playlist before they were fetched');
    }

    let changed = false;
    for (const segment of fresh) {
      if (signal.aborted) return;
      // An undecided prefetch segment (maybe an ad's first) waits until it is listed in full; in
      // a playlist that ended it never will be, and is left out.
      if (segment.prefetch && segment.ad) {
        if (!playlist.endList) break;
        next = segment.sequence + 1;
        stats.lastSequence = segment.sequence;
        stats.segmentsMissed += 1;
        continue;
      }
      changed = true;
      if (segment.ad) {
        next = segment.sequence + 1;
        stats.lastSequence = segment.sequence;
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
        // A prefetch segment not there yet is tried again when it is listed in full (unless the playlist ended).
        if (segment.prefetch && !playlist.endList) break;
        // Given up, as fed: a new connection goes on after it rather than count it again.
        next = segment.sequence + 1;
        stats.lastSequence = segment.sequence;
        stats.segmentsMissed += 1;
        continue;
      }
      next = segment.sequence + 1;
      stats.lastSequence = segment.sequence;
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
      // Ended before this connection had anything to feed: the stream is over, not lost (the source waits, offline, for more).
      if (stats.segmentsFed === fedBefore) throw new PanoptesError(ErrorCode.SourceOffline, `HLS playlist ${label}: the stream has ended (EXT-X-ENDLIST), nothing new after segment ${next - 1}`);
      logger.info({ segmentsFed: stats.segmentsFed }, 'HLS playlist ended (EXT-X-ENDLIST)');
      return;
    }

    const targetS = playlist.targetDurationS || segments.at(-1)?.durationS || 2;
    const lowLatencyS = segments.some((s) => s.prefetch) ? segments.filter((s) => !s.prefetch).at(-1)?.durationS : undefined;
    // Bounded both ways: a target of 0 (or a zero-length segment) would poll without pause, and one of years never.
    const waitS = Math.min(MAX_POLL_S, Math.max(MIN_POLL_S, lowLatencyS ?? (changed ? targetS : targetS / 2)));
    const waitMs = loadStartedAt + waitS * 1000 - Date.now();
    if (waitMs > 0) await delay(waitMs, undefined, { signal }).catch(() => undefined);
  }
}

/** A live playlist is loaded again after this long at least, and at most. */
const MIN_POLL_S = 0.5;
const MAX_POLL_S = 60;

async function fetchPlaylist(url: string, http: HttpContext): Promise<{ text: string; finalUrl: string }> {
  const what = `HLS playlist ${http.label}`;
  return httpRequest(url, what, http, async (response) => ({ text: (await readBody(response, MAX_TEXT_BYTES, what)).toString('utf8'), finalUrl: response.url || url }));
}

/** A segment's bytes, or undefined (logged) when it could not be fetched. */
async function fetchSegment(segment: HlsSegment, http: HttpContext, logger: Logger): Promise<Buffer | undefined> {
  try {
    const what = `HLS segment ${segment.sequence} of ${http.label}`;
    return await httpRequest(segment.url, what, http, async (response) => readBody(response, MAX_SEGMENT_BYTES, what));
  } catch (err) {
    if (http.signal.aborted) return undefined;
    logger.warn({ sequence: segment.sequence, prefetch: segment.prefetch }, `segment not fetched: ${(err as Error).message}`);
    return undefined;
  }
}
