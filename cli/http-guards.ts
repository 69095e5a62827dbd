/**
 * What keeps a web page in the user's browser from driving the HTTP API: the Host header must
 * name this server (DNS rebinding gives a page's own name to 127.0.0.1), requests from another
 * site are refused (Origin, Sec-Fetch-Site), and anything that changes state needs a token that
 * a page cannot know.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { describeError, ensureDir, ErrorCode, PanoptesError } from '../core/index.js';

/**
 * Values a request's Host header may carry: the address bound and loopback names with this
 * server's port, and `extra` (names behind a proxy). A browser leaves out a default port, so an
 * extra name given with 80 or 443, or with no port, is also accepted as the bare name.
 */
export function allowedHosts(boundHost: string, port: number, extra: readonly string[] = []): Set<string> {
  const wildcard = boundHost === '0.0.0.0' || boundHost === '::';
  const interfaces = wildcard ? Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address)) : [];
  const names = [boundHost, ...interfaces, 'localhost', '127.0.0.1', '::1', ...extra];
  const bare = extra.map((name) => name.replace(/:(80|443)$/, '')).filter((name) => !/:\d+$/.test(name));
  return new Set([...names.map((name) => hostHeader(name, port)), ...bare].map((host) => host.toLowerCase()));
}

/** `name` as a Host header carries it: IPv6 addresses in brackets, with the port unless it names one. */
function hostHeader(name: string, port: number): string {
  const ipv6 = (name.match(/:/g)?.length ?? 0) > 1 && !name.startsWith('[');
  const host = ipv6 ? `[${name}]` : name;
  return /:\d+$/.test(host) && !host.endsWith(']') ? host : `${host}:${port}`;
}

export interface RequestHeaders {
  host?: string | undefined;
  origin?: string | undefined;
  'sec-fetch-site'?: string | undefined;
}

/** Why a request may not reach this server at all, whatever it asks; undefined when it may. */
export function checkSite(headers: RequestHeaders, hosts: ReadonlySet<string>): string | undefined {
  const host = headers.host?.toLowerCase();
  if (!host || !hosts.has(host)) {
    // Not the whole list: bound to every interface, it would tell any caller every address of the machine.
    const loopback = [...hosts].find((h) => h.startsWith('localhost:')) ?? 'localhost';
    return `Host "${headers.host ?? ''}" is not a name of this server; use ${loopback} or the address it listens on, with its port, or list the name in http.allowedHosts`;
  }
  const origin = headers.origin;
  if (origin !== undefined && !(/^https?:\/\//.test(origin) && hosts.has(origin.replace(/^https?:\/\//, '').toLowerCase()))) {
    return `cross-origin requests are refused (Origin ${origin})`;
  }
  const site = headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    return `requests from another site are refused (Sec-Fetch-Site: ${site})`;
  }
  return undefined;
}

/** Why `Authorization` does not carry `Bearer <token>` (compared in constant time); undefined when it does. */
export function checkToken(authorization: string | undefined, token: string, where: string): string | undefined {
  const given = /^Bearer (\S+)$/i.exec(authorization ?? '')?.[1] ?? '';
  const digest = (text: string): Buffer => createHash('sha256').update(text).digest();
  if (given && timingSafeEqual(digest(given), digest(token))) return undefined;
  return `this request changes state: send "Authorization: Bearer <token>" with the API token (${where})`;
}

export interface ApiToken {
  token: string;
  /** Where it came from, for the operator's messages: never the token itself. */
  where: string;
  /** Where it came from, for a client refused without it: no path of this machine. @defaultValue `where` */
  hint?: string;
}

/**
 * The token mutating requests need: PANOPTES_API_TOKEN, else the deployment's `http.token`, else
 * the one in `<dataDir>/api-token`, made (readable by its owner only) at first start.
 */
export function apiToken(dataDir: string, configured?: string): ApiToken {
  const fromEnv = process.env.PANOPTES_API_TOKEN;
  if (fromEnv) return { token: fromEnv, where: 'the PANOPTES_API_TOKEN environment variable' };
  if (configured) return { token: configured, where: "the deployment's http.token" };
  const file = join(dataDir, 'api-token');
  try {
    if (!existsSync(file)) {
      ensureDir(dataDir, 'dataDir');
      writeFileSync(file, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
    }
    return { token: readFileSync(file, 'utf8').trim(), where: `the file ${file}`, hint: "the file api-token in the server's data directory" };
  } catch (err) {
    throw new PanoptesError(ErrorCode.ConfigInvalid, `cannot make or read the API token file ${file}: ${describeError(err)}; set PANOPTES_API_TOKEN instead`, { cause: err });
  }
}
