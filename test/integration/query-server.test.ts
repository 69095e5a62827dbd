import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DETECTIONS, FRAMES } from '../../apps/index.js';
import { startHttpApi } from '../../cli/http-api.js';
import { ErrorCode, silentLogger } from '../../core/index.js';
import { createChdbSink, type ResultSink } from '../../sinks/index.js';

describe('GET /query', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-query-server-'));
  let reader: ResultSink;
  let server: { url: string; close: () => Promise<void> };

  beforeAll(async () => {
    const writer = createChdbSink({ path: dir, logger: silentLogger() });
    await writer.ensureTables([DETECTIONS, FRAMES]);
    await writer.insert(DETECTIONS, [1, 2, 3].map((seq) => ({
      app: 'traffic',
      table: 'detections',
      rowId: `traffic/cam/${seq}/detect/0`,
      source: 'cam',
      fields: { frame_seq: seq, frame_time: 1_700_000_000_000, node: 'detect', class: seq === 3 ? 'bus' : 'car', score: 0.9, x1: 0, y1: 0, x2: 1, y2: 1 },
    })));
    await writer.close();
    reader = createChdbSink({ path: dir, readOnly: true, limits: { maxResultRows: 100 }, logger: silentLogger() });
    const savedQuery = (name: string): string => {
      if (name !== 'traffic.objects_per_class') throw new Error(`no saved query ${name}`);
      return 'SELECT class, count() AS n FROM detections GROUP BY class ORDER BY n DESC';
    };
    server = await startHttpApi({ queries: { sink: reader, savedQuery }, port: 0, logger: silentLogger() });
  });
  afterAll(async () => {
    await server.close();
    await reader.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = async (query: string): Promise<{ status: number; body: string }> => {
    const response = await fetch(`${server.url}/query?${query}`);
    return { status: response.status, body: await response.text() };
  };
  const sql = (text: string): string => `sql=${encodeURIComponent(text)}`;

  it('answers SQL as JSON, CSV or a table, and saved queries by name', async () => {
    const json = await get(sql('SELECT class, count() AS n FROM detections GROUP BY class ORDER BY class'));
    expect(json.status).toBe(200);
    // As the CLI's --format json: an array of row objects; with `columns`, the columns too.
    expect(JSON.parse(json.body)).toEqual([{ class: 'bus', n: 1 }, { class: 'car', n: 2 }]);
    const columns = await get(`${sql('SELECT class, count() AS n FROM detections GROUP BY class ORDER BY class')}&format=columns`);
    expect(JSON.parse(columns.body)).toMatchObject({ columns: [{ name: 'class' }, { name: 'n' }], rows: [{ class: 'bus', n: 1 }, { class: 'car', n: 2 }] });
    expect((await get(`${sql('SELECT 1 AS one')}&format=csv`)).body).toBe('one\n1\n');
    expect((await get(`${sql('SELECT 1 AS one')}&format=table`)).body).toContain('(1 row)');
    const saved = await get('saved=traffic.objects_per_class');
    expect(JSON.parse(saved.body)).toEqual([{ class: 'car', n: 2 }, { class: 'bus', n: 1 }]);
  });

  it('refuses writes however they are phrased, and nothing changes', async () => {
    for (const text of ['DROP TABLE detections', '/* SELECT */ DROP TABLE detections', 'SELECT 1 SETTINGS readonly = 0', "INSERT INTO detections (row_id) VALUES ('x')"]) {
      const answer = await get(sql(text));
      expect(answer.status, text).toBe(403);
      expect(JSON.parse(answer.body).error.code, text).toBe(ErrorCode.QueryReadOnly);
    }
    const multi = await get(sql('SELECT 1; DROP TABLE detections'));
    expect([400, 403]).toContain(multi.status);
    expect(JSON.parse((await get(sql('SELECT count() AS n FROM detections'))).body)).toEqual([{ n: 3 }]);
  });

  it('says what is wrong with a bad request', async () => {
    expect((await get('')).status).toBe(400);
    expect(JSON.parse((await get(sql('SELECT * FROM nowhere'))).body).error.code).toBe(ErrorCode.QueryFailed);
    expect((await get(sql('SELECT arrayJoin(range(1000)) AS n'))).status).toBe(400); // over the row limit
    const xml = await get(`${sql('SELECT 1')}&format=xml`);
    expect(xml.status).toBe(400);
    expect(JSON.parse(xml.body).error.message).toBe('querystring/format must be equal to one of the allowed values: json, columns, csv, table');
    expect((await fetch(`${server.url}/other`)).status).toBe(404);
  });
});
