import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeJpeg, encodeJpeg } from '../../analyzers/index.js';
import { pictureEvents } from '../../analyzers/dag/snapshots.js';
import { createSnapshotStore } from '../../cli/snapshots.js';
import { silentLogger, type ResultRow } from '../../core/index.js';

const grey = (width: number, height: number) => ({ width, height, data: new Uint8Array(width * height * 3).fill(128) });
const row = (table: string, rowId: string, fields: ResultRow['fields']): ResultRow => ({ app: 'traffic', table, rowId, source: 'road', fields: { frame_seq: 7, ...fields } });

describe('pictures of events', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-snapshots-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("draws the event's object on its frame, keeps it, and records where; a track's end and other rows get none", async () => {
    const store = createSnapshotStore({ dataDir: dir, logger: silentLogger() });
    const rows = [
      row('detections', 'd0', { class: 'car', track_id: '3', x1: 10, y1: 10, x2: 60, y2: 50 }),
      row('detections', 'd1', { class: 'car', track_id: '4', x1: 100, y1: 10, x2: 150, y2: 50 }),
      row('events', 'e-cross', { event: 'line_crossing', name: 'midline', track_id: '3', class: 'car', direction: 'up', snapshot: '' }),
      row('events', 'e-track', { event: 'track', name: 'detect', track_id: '4', class: 'car', snapshot: '' }),
    ];
    const frame = { jpeg: await encodeJpeg(grey(160, 90)), width: 160, height: 90 };
    const errors: unknown[] = [];
    await pictureEvents(rows, frame, store, (err) => errors.push(err));
    store.close();
    expect(errors).toEqual([]);
    const path = String(rows[2]!.fields.snapshot);
    expect(path).toMatch(/^traffic\/road\/7-[0-9a-f]{16}\.jpg$/);
    expect(rows[3]!.fields.snapshot).toBe('');
    const picture = await decodeJpeg(readFileSync(join(dir, 'snapshots', path)));
    expect([picture.width, picture.height]).toEqual([160, 90]);
    // The crossing car's box is drawn (its left edge), the other car's is not.
    const at = (x: number, y: number): number[] => [...picture.data.subarray((y * 160 + x) * 3, (y * 160 + x) * 3 + 3)];
    expect(Math.abs(at(10, 30)[0]! - 128) + Math.abs(at(10, 30)[2]! - 128)).toBeGreaterThan(60);
    expect(at(100, 30).every((v) => Math.abs(v - 128) < 12)).toBe(true);
  });

  it('a picture that cannot be kept leaves its row without one, and says why', async () => {
    const rows = [row('events', 'e', { event: 'change', name: 'score', value: '10', previous: '0', snapshot: '' })];
    const errors: unknown[] = [];
    await pictureEvents(rows, grey(32, 32), { save: () => Promise.reject(new Error('disk full')) }, (err) => errors.push(err));
    expect(rows[0]!.fields.snapshot).toBe('');
    expect(String(errors[0])).toContain('disk full');
  });

  it('removes pictures older than the rows kept, and keeps the rest', async () => {
    const folder = join(dir, 'retention', 'snapshots', 'traffic', 'road');
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, '1-0000000000000000.jpg'), 'old');
    writeFileSync(join(folder, '2-0000000000000000.jpg'), 'new');
    const tenDaysAgo = (Date.now() - 10 * 86_400_000) / 1000;
    utimesSync(join(folder, '1-0000000000000000.jpg'), tenDaysAgo, tenDaysAgo);
    const store = createSnapshotStore({ dataDir: join(dir, 'retention'), retentionDays: 7, logger: silentLogger() });
    for (let i = 0; i < 100 && existsSync(join(folder, '1-0000000000000000.jpg')); i++) await new Promise((r) => setTimeout(r, 10));
    store.close();
    expect(existsSync(join(folder, '1-0000000000000000.jpg'))).toBe(false);
    expect(existsSync(join(folder, '2-0000000000000000.jpg'))).toBe(true);
  });
});
