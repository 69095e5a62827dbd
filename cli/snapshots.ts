/**
 * Pictures of events, kept under `<dataDir>/snapshots/<app>/<source>/` as JPEGs, for as long as
 * the rows are (`sink.retentionDays`). The backend takes them; the HTTP API serves them.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Logger, ResultRow } from '../core/index.js';
import type { SnapshotStore } from '../analyzers/index.js';

const SWEEP_EVERY_MS = 60 * 60_000;

export const snapshotsDir = (dataDir: string): string => join(resolve(dataDir), 'snapshots');

export function createSnapshotStore(options: { dataDir: string; retentionDays?: number | undefined; logger: Logger }): SnapshotStore & { close(): void } {
  const root = snapshotsDir(options.dataDir);
  const { retentionDays, logger } = options;
  const sweep = async (): Promise<void> => {
    if (retentionDays === undefined) return;
    const before = Date.now() - retentionDays * 86_400_000;
    let removed = 0;
    for (const entry of await readdir(root, { recursive: true, withFileTypes: true }).catch(() => [])) {
      if (!entry.isFile() || !entry.name.endsWith('.jpg')) continue;
      const file = join(entry.parentPath, entry.name);
      const modified = (await stat(file).catch(() => undefined))?.mtimeMs;
      if (modified === undefined || modified >= before) continue;
      await rm(file, { force: true });
      removed += 1;
    }
    if (removed > 0) logger.info({ removed, retentionDays }, 'removed pictures of events older than the rows kept');
  };
  const sweeping = (): void => void sweep().catch((err: unknown) => logger.warn({ err }, 'removing old pictures of events failed'));
  sweeping();
  const timer = setInterval(sweeping, SWEEP_EVERY_MS).unref();

  return {
    /** Rows record `<app>/<source>/<frame seq>-<hash of the row id>.jpg`, each part a plain name. */
    async save(row: ResultRow, jpeg: Uint8Array) {
      const path = `${plain(row.app)}/${plain(row.source)}/${Number(row.fields.frame_seq)}-${createHash('sha256').update(row.rowId).digest('hex').slice(0, 16)}.jpg`;
      const file = join(root, path);
      await mkdir(join(file, '..'), { recursive: true });
      // Written whole, then renamed: a reader never sees half a picture.
      await writeFile(`${file}.part`, jpeg);
      await rename(`${file}.part`, file);
      return path;
    },
    close: () => clearInterval(timer),
  };
}

/** An app or source id as one plain path segment. */
const plain = (id: string): string => id.toLowerCase().replace(/[^a-z0-9._-]+/g, '_').replace(/^[^a-z0-9]+/, '') || '_';
