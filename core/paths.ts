import { accessSync, constants, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCode, PanoptesError } from './errors.js';

/** The folder holding Panoptes' package.json, whether running from source or from dist/. */
export function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'panoptes') {
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the panoptes package root');
    dir = parent;
  }
}

/**
 * Resolves a path from a config file: `npm:<package>/<file>` points into an installed package,
 * anything else is relative to `baseDir`.
 */
export function resolveConfigPath(path: string, baseDir: string): string {
  if (!path.startsWith('npm:')) return resolve(baseDir, path);
  const spec = path.slice(4);
  const parts = spec.split('/');
  const nameParts = spec.startsWith('@') ? 2 : 1;
  const pkg = parts.slice(0, nameParts).join('/');
  const rest = parts.slice(nameParts).join('/');
  // A package's own file: `npm:../x` or `npm:pkg/../../x` would name a file outside node_modules.
  if (!/^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*$/i.test(pkg) || parts.slice(nameParts).some((p) => p === '..' || p === '.' || p === '')) {
    throw new PanoptesError(ErrorCode.ConfigInvalid, `got "${path}"; expected npm:<package>/<file inside it>`);
  }
  const searchPaths = createRequire(join(projectRoot(), 'package.json')).resolve.paths(pkg) ?? [];
  for (const nodeModules of searchPaths) {
    const candidate = join(nodeModules, pkg, rest);
    if (existsSync(candidate)) return candidate;
  }
  return join(projectRoot(), 'node_modules', pkg, rest);
}

/**
 * Makes sure `path` is a directory this process can write, creating it and its missing parents
 * one level at a time. Not `mkdir(path, { recursive: true })`: Node's recursive mkdir retries
 * forever, on the main thread, when a level cannot be created and reports ENOENT (anywhere
 * under /proc), so a bad `dataDir` spun at 100% CPU, deaf to SIGTERM.
 * @param key - the setting the path came from, for the message (e.g. `dataDir`)
 * @throws PanoptesError ConfigInvalid naming the path, the level that failed and why
 */
export function ensureDir(path: string, key: string): string {
  const target = resolve(path);
  const fail = (what: string, cause?: unknown): never => {
    // The system's own words ("ENOENT: no such file or directory, mkdir '/proc/x'") say why.
    const reason = cause instanceof Error ? `: ${cause.message}` : '';
    throw new PanoptesError(ErrorCode.ConfigInvalid, `${key} ${target}: ${what}${reason}`, {
      details: { key, path: target },
      ...(cause === undefined ? {} : { cause }),
    });
  };
  const missing: string[] = [];
  let existing = target;
  while (!existsSync(existing)) {
    missing.unshift(existing);
    const parent = dirname(existing);
    if (parent === existing) break;
    existing = parent;
  }
  if (!statSync(existing).isDirectory()) fail(`cannot create a directory here: ${existing} is a file, not a directory`);
  for (const dir of missing) {
    try {
      mkdirSync(dir);
    } catch (err) {
      // Another process may have made it meanwhile; anything else means it cannot be made.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(dir).isDirectory()) fail(`cannot create ${dir}`, err);
    }
  }
  try {
    accessSync(target, constants.W_OK);
  } catch (err) {
    fail('is not writable', err);
  }
  return target;
}
