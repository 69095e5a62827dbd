import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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
  const searchPaths = createRequire(join(projectRoot(), 'package.json')).resolve.paths(pkg) ?? [];
  for (const nodeModules of searchPaths) {
    const candidate = join(nodeModules, pkg, rest);
    if (existsSync(candidate)) return candidate;
  }
  return join(projectRoot(), 'node_modules', pkg, rest);
}
