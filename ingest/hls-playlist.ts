/**
 * HLS playlists as text (RFC 8216): media playlists (segments with absolute URLs, sequence
 * numbers, carried-on program date-times and why each is an ad) and master playlists (their
 * variants, and which one to watch). No I/O: the follower (`./hls.ts`) fetches and feeds.
 *
 * Ad segments: Twitch's stitched ads (an EXT-X-DATERANGE of class `twitch-stitched-ad` covering
 * the segment's program date-time, or an EXTINF title other than `live`) and SCTE-35 breaks
 * (between EXT-X-CUE-OUT and EXT-X-CUE-IN).
 */
import { Parser, type Manifest } from 'm3u8-parser';
import { ErrorCode, PanoptesError } from '../core/index.js';

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

/** Most segments in a playlist: more than two days of 2-s segments. */
const MAX_SEGMENTS = 100_000;
/** Date ranges of a playlist read, its latest (Twitch lists a few). */
const MAX_DATE_RANGES = 256;

/** A playlist that is not one: the source's address is wrong, or the server answered something else. */
export function badPlaylist(what: string): PanoptesError {
  return new PanoptesError(ErrorCode.SourceDecode, what, { retriable: true });
}

function checkHeader(text: string): void {
  const first = text.replace(/^\uFEFF/, '').trimStart().split(/\r?\n/, 1)[0]?.trim() ?? '';
  if (first !== '#EXTM3U') throw badPlaylist(`not an HLS playlist (its first line is not #EXTM3U; it reads as ${kindOf(first)})`);
}

/**
 * What a body looks like, without its words: the error is served to anyone who may list the
 * sources, and an address given to a source may be some internal service's.
 */
function kindOf(line: string): string {
  if (line === '') return 'empty';
  if (/^</.test(line)) return 'HTML or XML';
  if (/^[{[]/.test(line)) return 'JSON';
  return /[\u0000-\u0008\u000e-\u001f\ufffd]/.test(line) ? 'binary' : 'text';
}

/** A master (multivariant) playlist lists variants rather than segments. */
export function isMasterPlaylist(text: string): boolean {
  return /^#EXT-X-STREAM-INF:/m.test(text);
}

function dateMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

/** An EXT-X-DATERANGE as the parser gives it: attributes named in camel case (`startDate`, `xTvTwitchAdRollType`). */
function toDateRange(range: Manifest['dateRanges'][number]): HlsDateRange {
  const attributes = Object.fromEntries(Object.entries(range).map(([key, value]) => [key, String(value)]));
  const startMs = dateMs(attributes.startDate);
  const seconds = Number(attributes.duration ?? attributes.plannedDuration);
  const endMs = dateMs(attributes.endDate) ?? (startMs !== undefined && Number.isFinite(seconds) ? startMs + seconds * 1000 : undefined);
  return { id: attributes.id ?? '', class: attributes.class, startMs, endMs, attributes };
}

/** A line as the parser's stream reads it (the types leave these events out). */
interface ParsedLine {
  type: string;
  tagType?: string;
  customType?: string;
  data?: string;
}

/** Twitch marks a stitched ad with its class, its id, or its X-TV-TWITCH-AD-* attributes (as streamlink reads them; the parser names them `xTvTwitchAd…`). */
export function isTwitchAdDateRange(range: HlsDateRange): boolean {
  return range.class === 'twitch-stitched-ad' || range.id.startsWith('stitched-ad-') || Object.keys(range.attributes).some((key) => key.startsWith('xTvTwitchAd'));
}

function inRange(ms: number | undefined, range: HlsDateRange): boolean {
  if (ms === undefined || range.startMs === undefined) return false;
  return ms >= range.startMs && (range.endMs === undefined || ms < range.endMs);
}

/**
 * The playlist as m3u8-parser reads it, with Twitch's tags through its extension hook: the
 * low-latency segments (EXT-X-TWITCH-PREFETCH, each with whether a discontinuity came before it,
 * which the parse stream tells in order) and whether any EXT-X-TWITCH-* tag appears.
 */
function parse(text: string): { manifest: Manifest; prefetch: { uri: string; discontinuity: boolean }[]; twitchTags: boolean } {
  checkHeader(text);
  const parser = new Parser();
  const prefetch: { uri: string; discontinuity: boolean }[] = [];
  let twitchTags = false;
  let discontinuity = false;
  parser.addParser({ expression: /^#EXT-X-TWITCH-PREFETCH:/, customType: 'twitchPrefetch' });
  parser.addParser({ expression: /^#EXT-X-TWITCH-/, customType: 'twitch' });
  parser.parseStream.on('data', (...data: unknown[]) => {
    const entry = data[0] as ParsedLine;
    if (entry.type === 'tag' && entry.tagType === 'discontinuity') discontinuity = true;
    else if (entry.type === 'uri') discontinuity = false;
    else if (entry.type === 'custom') {
      twitchTags = true;
      if (entry.customType !== 'twitchPrefetch') return;
      const line = entry.data ?? '';
      prefetch.push({ uri: line.slice(line.indexOf(':') + 1).trim(), discontinuity });
      discontinuity = false;
    }
  });
  parser.push(text);
  parser.end();
  return { manifest: parser.manifest, prefetch, twitchTags };
}

/**
 * Parses a media playlist: its segments (with absolute URLs, sequence numbers, carried-on
 * program date-times and ad reasons) and the tags that matter for following it.
 * @param url the playlist's own URL (after redirects): relative segment URIs resolve against it
 * @throws PanoptesError SourceDecode for text that is not a media playlist, or encrypted segments
 */
export function parseMediaPlaylist(text: string, url: string, options: ParseMediaOptions = {}): HlsMediaPlaylist {
  if (isMasterPlaylist(text)) throw badPlaylist('a master playlist where a media playlist was expected');
  const { manifest, prefetch, twitchTags } = parse(text);
  const mediaSequence = manifest.mediaSequence ?? 0;
  // Past 2^53 a number plus one is itself: the follower would feed the same segments for ever.
  if (!Number.isSafeInteger(mediaSequence + manifest.segments.length + prefetch.length)) throw badPlaylist(`a media sequence number too large to count on (${mediaSequence})`);
  if (manifest.segments.length + prefetch.length > MAX_SEGMENTS) throw badPlaylist(`${manifest.segments.length + prefetch.length} segments: more than ${MAX_SEGMENTS}`);
  const playlist: HlsMediaPlaylist = {
    targetDurationS: manifest.targetDuration ?? 0,
    mediaSequence,
    endList: manifest.endList === true,
    segments: [],
    // The latest only (each segment is checked against each ad range): a long event's pile up.
    dateRanges: (manifest.dateRanges ?? []).slice(-MAX_DATE_RANGES).map(toDateRange),
    twitch: twitchTags,
  };
  let cueOut = options.cueOutOpenAtStart ?? false;
  let nextDateMs: number | undefined;
  for (const segment of manifest.segments) {
    if (!Number.isFinite(segment.duration)) throw badPlaylist(`a segment duration that is not a number (segment ${segment.uri.slice(0, 60)})`);
    const method = segment.key?.method ?? 'NONE';
    if (method !== 'NONE') throw badPlaylist(`encrypted segments (EXT-X-KEY METHOD=${method}) are not supported`);
    if (segment.cueIn !== undefined) cueOut = false;
    // CONT repeats on each segment of a break, so a window that begins mid-break still knows.
    if (segment.cueOut !== undefined || segment.cueOutCont !== undefined) cueOut = true;
    const programDateTimeMs = segment.programDateTime ?? nextDateMs;
    playlist.segments.push({
      sequence: mediaSequence + playlist.segments.length,
      url: new URL(segment.uri, url).href,
      durationS: segment.duration,
      title: segment.title?.trim() ?? '',
      discontinuity: segment.discontinuity === true,
      programDateTimeMs,
      cueOut,
      ad: undefined,
      prefetch: false,
      mapUrl: segment.map?.uri === undefined ? undefined : new URL(segment.map.uri, url).href,
    });
    nextDateMs = programDateTimeMs === undefined ? undefined : programDateTimeMs + segment.duration * 1000;
  }

  // Prefetch segments come last; they take the duration of the last full one, and a start time
  // carried on from it, so that a date range can still tell whether they are ads.
  const last = playlist.segments.at(-1);
  for (const { uri, discontinuity } of prefetch) {
    const durationS = last?.durationS ?? playlist.targetDurationS;
    playlist.segments.push({
      sequence: mediaSequence + playlist.segments.length,
      url: new URL(uri, url).href,
      durationS,
      title: '',
      discontinuity,
      programDateTimeMs: nextDateMs,
      cueOut,
      ad: discontinuity ? 'prefetch-discontinuity' : undefined,
      prefetch: true,
      mapUrl: last?.mapUrl,
    });
    nextDateMs = nextDateMs === undefined ? undefined : nextDateMs + durationS * 1000;
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
  const { manifest } = parse(text);
  const videoGroups = manifest.mediaGroups?.VIDEO ?? {};
  return (manifest.playlists ?? []).map((variant) => {
    const attributes = variant.attributes ?? {};
    const { width, height } = attributes.RESOLUTION ?? {};
    const group = typeof attributes.VIDEO === 'string' ? attributes.VIDEO : undefined;
    const name = (group !== undefined ? Object.keys(videoGroups[group] ?? {})[0] : undefined) ?? group ?? (height ? `${height}p` : `${attributes.BANDWIDTH ?? 0}bps`);
    const namedHeight = Number(/(\d{3,4})p/.exec(name)?.[1]);
    const codecs = attributes.CODECS;
    return {
      url: new URL(variant.uri, url).href,
      bandwidth: Number(attributes.BANDWIDTH ?? 0),
      width: width || undefined,
      height: height || namedHeight || undefined,
      frameRate: Number(attributes['FRAME-RATE']) || undefined,
      name,
      audioOnly: !height && (/audio/i.test(name) || (codecs !== undefined && !/avc|hvc|hev|av01|vp0?[89]/i.test(codecs))),
    };
  });
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
