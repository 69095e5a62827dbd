/**
 * Twitch channels as live sources, resolved as streamlink does: a playback access token from
 * Twitch's GQL API, the usher master playlist it unlocks, a variant by quality, and its media
 * playlist followed by the HLS follower (which skips the stitched ads).
 *
 * Each connection resolves afresh, so an expired token (the media playlist answers 403) is
 * renewed by the live source's reconnect. A channel that is not broadcasting (no token, or
 * usher's 404) is a `SourceOffline` error: the live source's offline state, not a failure.
 *
 * Secrets: the client id, the OAuth token and the playback token and signature never reach a
 * log line or an error message; URLs are logged without their query strings, and the media
 * playlist (whose path is itself signed) only by channel and variant name.
 */
import { ErrorCode, PanoptesError, redactUrl, silentLogger, type Logger } from '../core/index.js';
import { createHlsStats, followHls, type HlsStats, type HlsStream } from './hls.js';
import { chooseVariant, parseMasterPlaylist, type HlsVariant } from './hls-playlist.js';
import { httpRequest, MAX_TEXT_BYTES, readBody } from './http.js';

/** The Twitch web player's public client id, which streamlink uses for these private endpoints too. */
export const TWITCH_WEB_CLIENT_ID = 'kimne78kx3ncx6brgo4mv6wki5h1ko';
export const TWITCH_GQL_URL = 'https://gql.twitch.tv/gql';
export const TWITCH_USHER_URL = 'https://usher.ttvnw.net';

/** The web player's own query for a live channel's (or a VOD's) playback token. */
const PLAYBACK_ACCESS_TOKEN_QUERY =
  'query PlaybackAccessToken_Template($login: String!, $isLive: Boolean!, $vodID: ID!, $isVod: Boolean!, $playerType: String!) {' +
  ' streamPlaybackAccessToken(channelName: $login, params: {platform: "web", playerBackend: "mediaplayer", playerType: $playerType}) @include(if: $isLive) { value signature __typename }' +
  ' videoPlaybackAccessToken(id: $vodID, params: {platform: "web", playerBackend: "mediaplayer", playerType: $playerType}) @include(if: $isVod) { value signature __typename } }';

export interface TwitchOptions {
  /** The channel's login name. */
  channel: string;
  /** `best`, `worst` or a height (`720p`); see {@link chooseVariant}. @defaultValue 'best' */
  quality?: string;
  /** @defaultValue {@link TWITCH_WEB_CLIENT_ID} */
  clientId?: string;
  /** A user's OAuth token (with or without its `oauth:` prefix): subscribers and Turbo users see no ads. */
  oauthToken?: string;
  /** @defaultValue {@link TWITCH_GQL_URL} */
  gqlUrl?: string;
  /** @defaultValue {@link TWITCH_USHER_URL} */
  usherUrl?: string;
  /** The player the token is asked for. @defaultValue 'site' */
  playerType?: string;
  logger?: Logger;
  /** Time limit of each request. @defaultValue 10000 */
  requestTimeoutMs?: number;
}

export interface TwitchStream {
  channel: string;
  variant: HlsVariant;
  /** The variant's media playlist; signed: never log it. */
  mediaPlaylistUrl: string;
}

interface PlaybackToken {
  value: string;
  signature: string;
}

/** Replaces each secret in `text`: Twitch's error texts may echo what they were sent. */
function scrub(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const secret of secrets) if (secret && secret.length >= 4) out = out.split(secret).join('<redacted>');
  return out;
}

/**
 * Resolves a channel to the media playlist of the variant `quality` picks.
 * @throws PanoptesError SourceOffline when the channel is not broadcasting (or does not exist);
 * SourceDecode when Twitch refuses or answers something unexpected
 */
export async function resolveTwitch(options: TwitchOptions, signal: AbortSignal): Promise<TwitchStream> {
  const channel = options.channel.toLowerCase();
  const logger = (options.logger ?? silentLogger()).child({ module: 'ingest.twitch', channel });
  const clientId = options.clientId ?? TWITCH_WEB_CLIENT_ID;
  const oauthToken = options.oauthToken?.replace(/^oauth:/i, '');
  const timeoutMs = options.requestTimeoutMs ?? 10_000;
  const name = `twitch channel ${channel}`;

  const token = await playbackToken(channel, clientId, oauthToken, options, { signal, timeoutMs });
  const secrets = [clientId, oauthToken, token.value, token.signature];
  const usher = new URL(`${(options.usherUrl ?? TWITCH_USHER_URL).replace(/\/$/, '')}/api/channel/hls/${encodeURIComponent(channel)}.m3u8`);
  const params = {
    player: 'twitchweb',
    p: String(Math.floor(Math.random() * 999_999)),
    type: 'any',
    allow_source: 'true',
    allow_audio_only: 'true',
    allow_spectre: 'false',
    fast_bread: 'true',
    sig: token.signature,
    token: token.value,
  };
  for (const [key, value] of Object.entries(params)) usher.searchParams.set(key, value);
  logger.debug({ usher: redactUrl(usher.href) }, 'asking usher for the master playlist');

  let master: { text: string; url: string };
  try {
    master = await httpRequest(usher.href, `${name}: usher`, { signal, headers: {}, timeoutMs }, async (r) => ({ text: (await readBody(r, MAX_TEXT_BYTES, `${name}: usher`)).toString('utf8'), url: r.url || usher.href }));
  } catch (err) {
    if (err instanceof PanoptesError && err.details.status === 404) {
      throw new PanoptesError(ErrorCode.SourceOffline, `${name} is offline (usher has no stream)`, { retriable: true, details: { channel } });
    }
    throw err;
  }
  let variants: HlsVariant[];
  try {
    variants = parseMasterPlaylist(master.text, master.url);
  } catch (err) {
    throw new PanoptesError(ErrorCode.SourceDecode, `${name}: usher's answer: ${scrub((err as Error).message, secrets)}`, { retriable: true, details: { channel } });
  }
  const variant = chooseVariant(variants, options.quality ?? 'best');
  if (!variant) {
    throw new PanoptesError(ErrorCode.SourceDecode, `${name}: the master playlist has no video variant (${variants.map((v) => v.name).join(', ') || 'none'})`, {
      retriable: true,
      details: { channel },
    });
  }
  logger.info({ variant: variant.name, resolution: variant.height ? `${variant.width}x${variant.height}` : undefined, bandwidth: variant.bandwidth }, 'twitch stream resolved');
  return { channel, variant, mediaPlaylistUrl: variant.url };
}

async function playbackToken(
  channel: string,
  clientId: string,
  oauthToken: string | undefined,
  options: TwitchOptions,
  request: { signal: AbortSignal; timeoutMs: number },
): Promise<PlaybackToken> {
  const name = `twitch channel ${channel}`;
  const body = JSON.stringify({
    operationName: 'PlaybackAccessToken_Template',
    query: PLAYBACK_ACCESS_TOKEN_QUERY,
    variables: { isLive: true, login: channel, isVod: false, vodID: '', playerType: options.playerType ?? 'site' },
  });
  const headers: Record<string, string> = { 'Client-ID': clientId, 'Content-Type': 'application/json' };
  if (oauthToken) headers.Authorization = `OAuth ${oauthToken}`;
  const what = `${name}: GQL playback token`;
  const answer = await httpRequest(options.gqlUrl ?? TWITCH_GQL_URL, what, { ...request, headers }, async (r) => JSON.parse((await readBody(r, MAX_TEXT_BYTES, what)).toString('utf8')) as unknown, {
    method: 'POST',
    body,
  });
  const data = answer as { data?: { streamPlaybackAccessToken?: Partial<PlaybackToken> | null }; errors?: { message?: string }[] };
  const problem = data.errors?.[0]?.message;
  if (problem !== undefined) {
    throw new PanoptesError(ErrorCode.SourceDecode, `${name}: GQL playback token: ${scrub(problem, [clientId, oauthToken]).slice(0, 200)}`, {
      retriable: true,
      details: { channel },
    });
  }
  const token = data.data?.streamPlaybackAccessToken;
  if (!token) {
    throw new PanoptesError(ErrorCode.SourceOffline, `${name}: no playback token (the channel does not exist or is not live)`, { retriable: true, details: { channel } });
  }
  if (typeof token.value !== 'string' || typeof token.signature !== 'string') {
    throw new PanoptesError(ErrorCode.SourceDecode, `${name}: GQL playback token: an answer without value and signature`, { retriable: true, details: { channel } });
  }
  return { value: token.value, signature: token.signature };
}

/** A live source's `connect` for a Twitch channel; `stats` counts over all its connections. */
export interface TwitchConnect {
  (signal: AbortSignal): Promise<HlsStream>;
  readonly stats: HlsStats;
}

/**
 * Each call resolves the channel and follows its media playlist, resolving once there is
 * content to read (after a pre-roll ad break, which ffmpeg never sees).
 * @throws RangeError for a quality that is not `best`, `worst` or a height
 */
export function twitchConnect(options: TwitchOptions & { stats?: HlsStats }): TwitchConnect {
  chooseVariant([], options.quality); // a quality it can never match fails now, not on every connection
  const stats = options.stats ?? createHlsStats();
  const connect = async (signal: AbortSignal): Promise<HlsStream> => {
    const resolved = await resolveTwitch(options, signal);
    const stream = followHls({
      url: resolved.mediaPlaylistUrl,
      signal,
      label: `twitch/${resolved.channel} ${resolved.variant.name}`,
      stats,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
    });
    await stream.ready();
    return stream;
  };
  return Object.assign(connect, { stats });
}
