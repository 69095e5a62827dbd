/**
 * What a source added over HTTP may be. The deployment file is trusted; an API request is not,
 * even with the token: it may name files under the allowed directories and URLs of the allowed
 * schemes, and nothing that the file alone should decide (lavfi graphs, which can write files;
 * Twitch endpoints, which would receive the OAuth token; a port opened for cameras to push to).
 * A path is a URL exactly when the config's compiler takes it for one (`scheme://`); one with a
 * scheme and no `//` (`concat:a|b`, `http:../x`) is refused before anything looks at the filesystem.
 * A URL's host must not be this machine (its own services listen there: the results' server,
 * Kafka, this API) or link-local (a cloud's metadata service), unless the deployment lists it.
 */
import { lookup } from 'node:dns/promises';
import { realpathSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { isAbsolute, relative, resolve } from 'node:path';
import { ErrorCode, isUrl, PanoptesError, type SourceConfig } from '../core/index.js';

export interface SourcePolicy {
  /** URL schemes, lower case, e.g. rtsp, https. */
  schemes: readonly string[];
  /** Absolute directories files may come from. */
  directories: readonly string[];
  /** Hosts URLs may name, lower case, IPv6 without brackets; empty: any but this machine's and link-local ones. */
  hosts: readonly string[];
}

/** Addresses that are this machine, or no one's in particular, whatever the interfaces say. */
const NOT_REMOTE = new BlockList();
for (const [net, prefix] of [['0.0.0.0', 8], ['127.0.0.0', 8], ['169.254.0.0', 16], ['224.0.0.0', 4]] as const) NOT_REMOTE.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [['::', 128], ['::1', 128], ['fe80::', 10], ['ff00::', 8]] as const) NOT_REMOTE.addSubnet(net, prefix, 'ipv6');

/** Whether `address` is this machine's, link-local or multicast: not a camera's or a stream server's. */
function isLocal(address: string): boolean {
  // An IPv4 address mapped into IPv6 (::ffff:127.0.0.1) is checked against the IPv4 subnets too.
  if (NOT_REMOTE.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4')) return true;
  return Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address.toLowerCase() === address.toLowerCase()));
}

/**
 * Refuses a URL whose host is not in `policy.hosts` (when it lists any), or (when it lists none)
 * resolves to this machine or a link-local address. Judged on the addresses the name has now: a
 * name that changes its answer later (DNS rebinding), a redirect, or a playlist's segment on
 * another host are not re-checked.
 */
export async function checkSourceHost(path: string, policy: SourcePolicy, resolveName = lookupAll): Promise<void> {
  if (!isUrl(path)) return;
  const host = normalHost(new URL(path).hostname);
  if (host === '') refuse('path', 'the URL names no host');
  if (policy.hosts.length > 0) {
    if (!policy.hosts.includes(host)) refuse('path', `${host} is not among the hosts sources may name (http.sources.hosts)`);
    return;
  }
  const addresses = isIP(host) ? [host] : await resolveName(host).catch(() => refuse('path', `${host} does not resolve to an address`));
  const local = addresses.find(isLocal);
  if (local !== undefined) {
    refuse('path', `${host}${local === host ? '' : ` (${local})`} is this machine or a link-local address; list it in http.sources.hosts to allow it`);
  }
}

/** A host as the policy compares it: lower case, an IPv6 address without its brackets. */
export function normalHost(host: string): string {
  return host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
}

async function lookupAll(host: string): Promise<string[]> {
  return (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
}

/** A source's config is a few levels deep; a body much deeper is junk that would only cost stack. */
const MAX_DEPTH = 8;

/** Refuses what the API may not ask for in a source's raw body, before anything looks at the filesystem. */
export function checkRequestedSource(body: unknown, baseDir: string, policy: SourcePolicy): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return; // the schema says what is wrong
  if (depthOf(body) > MAX_DEPTH) throw new PanoptesError(ErrorCode.HttpBadRequest, `the body nests deeper than ${MAX_DEPTH} levels; send one source's config`);
  const source = body as Record<string, unknown>;
  if (source.synthetic !== undefined) refuse('synthetic', 'synthetic sources (ffmpeg lavfi graphs) come from the deployment file only');
  if (source.listen === true) refuse('listen', 'a source that listens for a pushed stream opens a port: it comes from the deployment file only');
  const twitch = source.twitch;
  if (typeof twitch === 'object' && twitch !== null) {
    for (const key of ['gqlUrl', 'usherUrl']) {
      if (key in twitch) refuse(`twitch.${key}`, "Twitch's endpoints can be changed in the deployment file only");
    }
  }
  if (typeof source.path !== 'string') return;
  if (isUrl(source.path)) {
    const scheme = source.path.slice(0, source.path.indexOf(':')).toLowerCase();
    if (!policy.schemes.includes(scheme)) refuse('path', `${scheme}: URLs are not allowed here; allowed: ${policy.schemes.join(', ')} (http.sources.schemes)`);
    return;
  }
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(source.path)?.[1]?.toLowerCase();
  if (scheme) refuse('path', `${scheme}: without // is neither a URL nor a file here (ffmpeg would read it as its ${scheme} protocol)`);
  if (!inside(resolve(baseDir, source.path), policy)) refuse('path', `files must be under ${policy.directories.join(', ')} (http.sources.directories)`);
}

/** After compiling (the file exists): the real path, links followed, must still be inside. */
export function checkCompiledSource(source: SourceConfig, policy: SourcePolicy): void {
  if (source.path && !isUrl(source.path) && !inside(realpathSync(source.path), policy)) {
    refuse('path', `the file links outside ${policy.directories.join(', ')} (http.sources.directories)`);
  }
}

function depthOf(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const [node, depth] = item;
    deepest = Math.max(deepest, depth);
    if (typeof node === 'object' && node !== null && depth <= MAX_DEPTH) for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}

function inside(path: string, policy: SourcePolicy): boolean {
  return policy.directories.some((dir) => {
    const rel = relative(dir, path);
    return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
  });
}

function refuse(key: string, message: string): never {
  throw new PanoptesError(ErrorCode.HttpForbidden, `${key}: ${message}`, { details: { key } });
}
