/**
 * Secrets out of everything Panoptes prints: log lines, errors, summaries, HTTP answers. One
 * helper for every printer, so a new printer cannot forget a rule.
 */

/** Environment variables whose values are secrets wherever they turn up. */
const SECRET_VARIABLES = ['PANOPTES_API_TOKEN', 'PANOPTES_TWITCH_OAUTH_TOKEN', 'PANOPTES_TWITCH_CLIENT_ID'];
const REDACTED = '<redacted>';
/**
 * A query parameter whose name holds a secret word anywhere: `token`, `sig` as well as signed
 * URLs' `X-Amz-Signature`, `X-Amz-Credential`, `X-Goog-Signature`, `X-Amz-Security-Token`, and
 * `jwt`, `session`, OAuth's `code`.
 * Redacting a harmless `keyframe=1` now and then is the cheaper mistake.
 */
const SECRET_PARAMETER = /([?&][\w.-]*(?:token|passw|pwd|sig|key|secret|auth|credential|jwt|session|code)[\w.-]*=)[^&\s"'#]+/gi;

/** A URL fit for logs and errors: no credentials, and no query string (signatures, tokens). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}${u.search ? `?${REDACTED}` : ''}`;
  } catch {
    return '<invalid URL>';
  }
}

/**
 * `text` with the credentials of URLs (`user:password@`), secret-looking query parameters,
 * Authorization header values and the values of the secret environment variables replaced.
 */
export function redact(text: string): string {
  let out = text
    // To the authority's last @: ffmpeg takes a password with a raw @ in it (`cam:p@ss@host`).
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi, `$1${REDACTED}@`)
    .replace(SECRET_PARAMETER, `$1${REDACTED}`)
    .replace(/\b(Bearer|OAuth|Basic) [A-Za-z0-9._~+/=-]{4,}/g, `$1 ${REDACTED}`);
  for (const name of SECRET_VARIABLES) {
    const secret = process.env[name];
    if (secret && secret.length >= 4) out = out.split(secret).join(REDACTED);
  }
  const password = passwordOf(process.env.PANOPTES_CLICKHOUSE_URL);
  if (password && password.length >= 4) out = out.split(password).join(REDACTED);
  return out;
}

function passwordOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return decodeURIComponent(new URL(url).password) || undefined;
  } catch {
    return undefined;
  }
}
