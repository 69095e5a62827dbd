/**
 * HLS playlists as text (RFC 8216): media playlists (segments with absolute URLs, sequence
 * numbers, carried-on program date-times and why each is an ad) and master playlists (their
 * variants, and which one to watch). No I/O: the follower (`./hls.ts`) fetches and feeds.
 *
 * Ad segments: Twitch's stitched ads (an EXT-X-DATERANGE of class `twitch-stitched-ad` covering
 * the segment's program date-time, or an EXTINF title other than `live`) and SCTE-35 breaks
 * (between EXT-X-CUE-OUT and EXT-X-CUE-IN).
 */
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

/** A playlist that is not one: the source's address is wrong, or the server answered something else. */
export function badPlaylist(what: string): PanoptesError {
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
