/** The HLS playlist parsers, ad detection and variant choice on hand-written playlists. */
import { describe, expect, it } from 'vitest';
import { ErrorCode, redactUrl } from '../../core/index.js';
import {
  chooseVariant,
  isMasterPlaylist,
  parseMasterPlaylist,
  parseMediaPlaylist,
} from '../../ingest/hls-playlist.js';
import { thrown } from '../helpers.js';

const BASE = 'https://cdn.example/live/stream.m3u8?token=secret';
const m3u8 = (...lines: string[]): string => ['#EXTM3U', ...lines].join('\n') + '\n';

describe('parseMediaPlaylist', () => {
  it('numbers segments from the media sequence and resolves their URLs against the playlist', () => {
    const playlist = parseMediaPlaylist(
      m3u8('#EXT-X-VERSION:3', '#EXT-X-TARGETDURATION:4', '#EXT-X-MEDIA-SEQUENCE:120', '#EXTINF:4.000,', 'seg120.ts', '#EXTINF:3.5,', '/abs/seg121.ts', '#EXT-X-DISCONTINUITY', '#EXTINF:4,', 'https://other.example/seg122.ts'),
      BASE,
    );
    expect(playlist).toMatchObject({ targetDurationS: 4, mediaSequence: 120, endList: false, twitch: false });
    expect(playlist.segments.map((s) => [s.sequence, s.url, s.durationS, s.discontinuity, s.ad])).toEqual([
      [120, 'https://cdn.example/live/seg120.ts', 4, false, undefined],
      [121, 'https://cdn.example/abs/seg121.ts', 3.5, false, undefined],
      [122, 'https://other.example/seg122.ts', 4, true, undefined],
    ]);
  });

  it('reads a VOD (EXT-X-ENDLIST) and accepts a byte-order mark and CRLF line ends', () => {
    const playlist = parseMediaPlaylist('\uFEFF#EXTM3U\r\n#EXT-X-TARGETDURATION:2\r\n#EXTINF:2,\r\na.ts\r\n#EXT-X-ENDLIST\r\n', BASE);
    expect(playlist.endList).toBe(true);
    expect(playlist.mediaSequence).toBe(0);
    expect(playlist.segments).toHaveLength(1);
  });

  it('refuses text that is not a playlist, a master playlist, and encrypted segments', () => {
    expect(thrown(() => parseMediaPlaylist('<html>404</html>', BASE)).code).toBe(ErrorCode.SourceDecode);
    // What the body looks like, never its words: the address may be an internal service's.
    expect(thrown(() => parseMediaPlaylist('<html>404</html>', BASE)).message).toBe('not an HLS playlist (its first line is not #EXTM3U; it reads as HTML or XML)');
    expect(thrown(() => parseMediaPlaylist('internal-admin-secret\n', BASE)).message).not.toContain('secret');
    expect(thrown(() => parseMediaPlaylist('{"key": 1}', BASE)).message).toMatch(/reads as JSON/);
    expect(thrown(() => parseMediaPlaylist('\u0000\u0001GIF', BASE)).message).toMatch(/reads as binary/);
    expect(thrown(() => parseMediaPlaylist(m3u8('#EXT-X-STREAM-INF:BANDWIDTH=1', 'v.m3u8'), BASE)).message).toMatch(/master playlist/);
    expect(thrown(() => parseMediaPlaylist(m3u8('#EXT-X-KEY:METHOD=AES-128,URI="k"', '#EXTINF:2,', 'a.ts'), BASE)).message).toMatch(/AES-128/);
    expect(parseMediaPlaylist(m3u8('#EXT-X-KEY:METHOD=NONE', '#EXTINF:2,', 'a.ts'), BASE).segments).toHaveLength(1);
  });

  it('carries the program date-time on from segment to segment', () => {
    const playlist = parseMediaPlaylist(m3u8('#EXT-X-PROGRAM-DATE-TIME:2024-05-01T10:00:00.000Z', '#EXTINF:2,', 'a.ts', '#EXTINF:2.5,', 'b.ts', '#EXTINF:2,', 'c.ts'), BASE);
    const t0 = Date.parse('2024-05-01T10:00:00.000Z');
    expect(playlist.segments.map((s) => s.programDateTimeMs)).toEqual([t0, t0 + 2000, t0 + 4500]);
  });

  /** Shaped like a real Twitch media playlist during a mid-roll (ids, names shortened). */
  const twitchPlaylist = m3u8(
    '#EXT-X-VERSION:3',
    '#EXT-X-TARGETDURATION:6',
    '#EXT-X-MEDIA-SEQUENCE:5000',
    '#EXT-X-TWITCH-LIVE-SEQUENCE:5004',
    '#EXT-X-TWITCH-ELAPSED-SECS:10000.000',
    '#EXT-X-TWITCH-TOTAL-SECS:10010.000',
    '#EXT-X-DATERANGE:ID="playlist-creation-1",CLASS="timestamp",START-DATE="2024-05-01T09:00:00.000Z",END-ON-NEXT=YES,X-SERVER-TIME="1714554000.00"',
    '#EXT-X-DATERANGE:ID="playlist-session-1",CLASS="twitch-session",START-DATE="2024-05-01T09:00:00.000Z",END-ON-NEXT=YES,X-TV-TWITCH-SESSIONID="1"',
    '#EXT-X-PROGRAM-DATE-TIME:2024-05-01T10:00:00.000Z',
    '#EXTINF:2.000,live',
    'https://video-edge.example/v1/segment/a.ts',
    '#EXTINF:2.000,live',
    'https://video-edge.example/v1/segment/b.ts',
    '#EXT-X-DATERANGE:ID="stitched-ad-1714557604-4",CLASS="twitch-stitched-ad",START-DATE="2024-05-01T10:00:04.000Z",DURATION=4.000,X-TV-TWITCH-AD-ROLL-TYPE="MIDROLL",X-TV-TWITCH-AD-POD-LENGTH="2"',
    '#EXT-X-DISCONTINUITY',
    '#EXT-X-PROGRAM-DATE-TIME:2024-05-01T10:00:04.000Z',
    '#EXTINF:2.000,Amazon|8675309',
    'https://video-edge.example/v1/segment/ad1.ts',
    '#EXTINF:2.000,Amazon|8675309',
    'https://video-edge.example/v1/segment/ad2.ts',
    '#EXT-X-DISCONTINUITY',
    '#EXT-X-PROGRAM-DATE-TIME:2024-05-01T10:00:08.000Z',
    '#EXTINF:2.000,live',
    'https://video-edge.example/v1/segment/c.ts',
    '#EXT-X-TWITCH-PREFETCH:https://video-edge.example/v1/segment/d.ts',
    '#EXT-X-DISCONTINUITY',
    '#EXT-X-TWITCH-PREFETCH:https://video-edge.example/v1/segment/e.ts',
  );

  it('reads a Twitch playlist: stitched ads by date range and title, prefetch segments numbered on', () => {
    const playlist = parseMediaPlaylist(twitchPlaylist, 'https://video-weaver.example/v1/playlist/x.m3u8');
    expect(playlist.twitch).toBe(true);
    expect(playlist.dateRanges.map((r) => r.class)).toEqual(['timestamp', 'twitch-session', 'twitch-stitched-ad']);
    const t0 = Date.parse('2024-05-01T10:00:00.000Z');
    expect(playlist.dateRanges[2]).toMatchObject({ id: 'stitched-ad-1714557604-4', startMs: t0 + 4000, endMs: t0 + 8000 });
    expect(playlist.segments.map((s) => [s.sequence, s.url.split('/').at(-1), s.title, s.ad, s.prefetch, s.discontinuity])).toEqual([
      [5000, 'a.ts', 'live', undefined, false, false],
      [5001, 'b.ts', 'live', undefined, false, false],
      [5002, 'ad1.ts', 'Amazon|8675309', 'daterange', false, true],
      [5003, 'ad2.ts', 'Amazon|8675309', 'daterange', false, false],
      [5004, 'c.ts', 'live', undefined, false, true],
      // A prefetch segment takes the last duration and a carried-on time; after a discontinuity
      // it may be an ad's first and stays undecided.
      [5005, 'd.ts', '', undefined, true, false],
      [5006, 'e.ts', '', 'prefetch-discontinuity', true, true],
    ]);
    expect(playlist.segments[5]).toMatchObject({ durationS: 2, programDateTimeMs: t0 + 10_000 });
  });

  it('tells Twitch ads by title alone (no date range), and by a stitched-ad id without a class', () => {
    const byTitle = parseMediaPlaylist(m3u8('#EXT-X-MEDIA-SEQUENCE:1', '#EXTINF:2.000,Amazon|1', 'ad.ts', '#EXTINF:2.000,live', 'a.ts', '#EXTINF:2.000,preroll', 'p.ts'), BASE);
    expect(byTitle.twitch).toBe(true);
    expect(byTitle.segments.map((s) => s.ad)).toEqual(['title', undefined, 'title']);

    const byId = parseMediaPlaylist(
      m3u8('#EXT-X-DATERANGE:ID="stitched-ad-1-2",START-DATE="2024-05-01T10:00:00Z",DURATION=2', '#EXT-X-PROGRAM-DATE-TIME:2024-05-01T10:00:00Z', '#EXTINF:2,', 'ad.ts', '#EXTINF:2,', 'a.ts'),
      BASE,
    );
    expect(byId.segments.map((s) => s.ad)).toEqual(['daterange', undefined]);
  });

  it('leaves titled segments alone outside Twitch, and non-ad date ranges too', () => {
    const playlist = parseMediaPlaylist(
      m3u8('#EXT-X-DATERANGE:ID="chapter-1",CLASS="com.example.chapter",START-DATE="2024-05-01T10:00:00Z"', '#EXT-X-PROGRAM-DATE-TIME:2024-05-01T10:00:00Z', '#EXTINF:2,Kick-off', 'a.ts'),
      BASE,
    );
    expect(playlist.twitch).toBe(false);
    expect(playlist.segments[0]?.ad).toBeUndefined();
  });

  const cuePlaylist = m3u8(
    '#EXT-X-TARGETDURATION:2',
    '#EXT-X-MEDIA-SEQUENCE:10',
    '#EXTINF:2,',
    'c10.ts',
    '#EXT-X-CUE-OUT:DURATION=4',
    '#EXTINF:2,',
    'ad11.ts',
    '#EXT-X-CUE-OUT-CONT:ElapsedTime=2,Duration=4',
    '#EXTINF:2,',
    'ad12.ts',
    '#EXT-X-CUE-IN',
    '#EXTINF:2,',
    'c13.ts',
  );

  it('marks SCTE-35 breaks, EXT-X-CUE-OUT to EXT-X-CUE-IN, as ads', () => {
    expect(parseMediaPlaylist(cuePlaylist, BASE).segments.map((s) => [s.sequence, s.ad])).toEqual([
      [10, undefined],
      [11, 'cue-out'],
      [12, 'cue-out'],
      [13, undefined],
    ]);
  });

  it('knows a break whose EXT-X-CUE-OUT has left the window: by EXT-X-CUE-OUT-CONT, or by what the last load saw', () => {
    const cont = m3u8('#EXT-X-MEDIA-SEQUENCE:12', '#EXT-X-CUE-OUT-CONT:ElapsedTime=2,Duration=4', '#EXTINF:2,', 'ad12.ts', '#EXT-X-CUE-IN', '#EXTINF:2,', 'c13.ts');
    expect(parseMediaPlaylist(cont, BASE).segments.map((s) => s.ad)).toEqual(['cue-out', undefined]);

    const bare = m3u8('#EXT-X-MEDIA-SEQUENCE:12', '#EXTINF:2,', 'ad12.ts', '#EXT-X-CUE-IN', '#EXTINF:2,', 'c13.ts');
    expect(parseMediaPlaylist(bare, BASE).segments.map((s) => s.ad)).toEqual([undefined, undefined]);
    expect(parseMediaPlaylist(bare, BASE, { cueOutOpenAtStart: true }).segments.map((s) => s.ad)).toEqual(['cue-out', undefined]);
  });
});

/** Shaped like a Twitch usher answer. */
const twitchMaster = m3u8(
  '#EXT-X-TWITCH-INFO:NODE="video-edge-1",MANIFEST-NODE-TYPE="weaver_cluster",SERVER-TIME="1714554000.00",TRANSCODESTACK="2023-Transcode-QS-V1"',
  '#EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="chunked",NAME="1080p60 (source)",AUTOSELECT=YES,DEFAULT=YES',
  '#EXT-X-STREAM-INF:BANDWIDTH=6000000,RESOLUTION=1920x1080,CODECS="avc1.64002A,mp4a.40.2",VIDEO="chunked",FRAME-RATE=60.000',
  'https://video-weaver.example/v1/playlist/chunked.m3u8',
  '#EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="720p60",NAME="720p60",AUTOSELECT=YES,DEFAULT=YES',
  '#EXT-X-STREAM-INF:BANDWIDTH=3400000,RESOLUTION=1280x720,CODECS="avc1.4D401F,mp4a.40.2",VIDEO="720p60",FRAME-RATE=60.000',
  'https://video-weaver.example/v1/playlist/720p60.m3u8',
  '#EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="720p30",NAME="720p30",AUTOSELECT=YES,DEFAULT=YES',
  '#EXT-X-STREAM-INF:BANDWIDTH=2300000,RESOLUTION=1280x720,CODECS="avc1.4D401F,mp4a.40.2",VIDEO="720p30",FRAME-RATE=30.000',
  'https://video-weaver.example/v1/playlist/720p30.m3u8',
  '#EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="480p30",NAME="480p",AUTOSELECT=YES,DEFAULT=YES',
  '#EXT-X-STREAM-INF:BANDWIDTH=1400000,RESOLUTION=852x480,CODECS="avc1.4D401F,mp4a.40.2",VIDEO="480p30",FRAME-RATE=30.000',
  'https://video-weaver.example/v1/playlist/480p30.m3u8',
  '#EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="160p30",NAME="160p",AUTOSELECT=YES,DEFAULT=YES',
  '#EXT-X-STREAM-INF:BANDWIDTH=230000,RESOLUTION=284x160,CODECS="avc1.4D400C,mp4a.40.2",VIDEO="160p30",FRAME-RATE=30.000',
  'https://video-weaver.example/v1/playlist/160p30.m3u8',
  '#EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="audio_only",NAME="audio_only",AUTOSELECT=NO,DEFAULT=NO',
  '#EXT-X-STREAM-INF:BANDWIDTH=160000,CODECS="mp4a.40.2",VIDEO="audio_only"',
  'https://video-weaver.example/v1/playlist/audio_only.m3u8',
);

describe('master playlists', () => {
  const variants = parseMasterPlaylist(twitchMaster, 'https://usher.example/api/channel/hls/x.m3u8?sig=s&token=t');

  it('reads variants with the names of their video renditions', () => {
    expect(isMasterPlaylist(twitchMaster)).toBe(true);
    expect(variants.map((v) => [v.name, v.height, v.frameRate, v.bandwidth, v.audioOnly])).toEqual([
      ['1080p60 (source)', 1080, 60, 6_000_000, false],
      ['720p60', 720, 60, 3_400_000, false],
      ['720p30', 720, 30, 2_300_000, false],
      ['480p', 480, 30, 1_400_000, false],
      ['160p', 160, 30, 230_000, false],
      ['audio_only', undefined, undefined, 160_000, true],
    ]);
    expect(variants[1]?.url).toBe('https://video-weaver.example/v1/playlist/720p60.m3u8');
  });

  it('chooses by quality: best, worst, a height (else the nearest lower), a frame rate, a bandwidth cap', () => {
    const pick = (quality: string, maxBandwidth?: number): string | undefined => chooseVariant(variants, quality, maxBandwidth)?.name;
    expect(pick('best')).toBe('1080p60 (source)');
    expect(pick('worst')).toBe('160p');
    expect(pick('720p')).toBe('720p60');
    expect(pick('720')).toBe('720p60');
    expect(pick('720p30')).toBe('720p30');
    expect(pick('600p')).toBe('480p');
    expect(pick('144p')).toBe('160p'); // nothing that low: the lowest there is
    expect(pick('best', 2_500_000)).toBe('720p30');
    expect(chooseVariant(variants.filter((v) => v.audioOnly), 'best')).toBeUndefined();
    expect(() => chooseVariant(variants, 'source')).toThrow(RangeError);
  });

  it('names a variant without a rendition by its height, and tells audio-only ones by codec', () => {
    const plain = parseMasterPlaylist(
      m3u8('#EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360', 'low.m3u8', '#EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS="mp4a.40.2"', 'audio.m3u8'),
      'https://cdn.example/master.m3u8',
    );
    expect(plain.map((v) => [v.name, v.url, v.audioOnly])).toEqual([
      ['360p', 'https://cdn.example/low.m3u8', false],
      ['64000bps', 'https://cdn.example/audio.m3u8', true],
    ]);
  });
});

describe('redactUrl', () => {
  it('drops the query string and credentials', () => {
    expect(redactUrl('https://user:pw@usher.example/api/channel/hls/x.m3u8?sig=abc&token=%7B%7D')).toBe('https://usher.example/api/channel/hls/x.m3u8?<redacted>');
    expect(redactUrl('http://127.0.0.1:8080/live.m3u8')).toBe('http://127.0.0.1:8080/live.m3u8');
    expect(redactUrl('not a url?token=x')).toBe('<invalid URL>');
  });
});
