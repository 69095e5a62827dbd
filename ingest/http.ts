/** HTTP requests of the stream sources (HLS playlists and segments, Twitch's API): time-limited, and named in errors without their URL. */
import { ErrorCode, PanoptesError } from '../core/index.js';

export interface HttpContext {
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

/** Most bytes of a playlist or an API answer: a day of 2-s segments with signed absolute URLs is about 15 MB. */
export const MAX_TEXT_BYTES = 16 << 20;
/** Most bytes of a media segment: ten seconds at 50 Mbit/s is about 60 MB. */
export const MAX_SEGMENT_BYTES = 64 << 20;

/**
 * An answer's body, refused (a PanoptesError naming `what`) once it passes `maxBytes`, or at once
 * where its Content-Length says it would: a server the user points at can send without end.
 */
export async function readBody(response: Response, maxBytes: number, what: string): Promise<Buffer> {
  const tooLarge = (): PanoptesError => new PanoptesError(ErrorCode.SourceDecode, `${what}: larger than ${maxBytes} bytes`, { details: { what, maxBytes } });
  if (Number(response.headers.get('content-length')) > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Leaving the loop early (too large) cancels the body.
  for await (const chunk of response.body ?? []) {
    size += chunk.length;
    if (size > maxBytes) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

