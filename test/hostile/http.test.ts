/**
 * The HTTP API as a web page in the user's browser, or a careless client, would drive it: a
 * page cannot reach it under another name (DNS rebinding), cannot send it requests from its
 * own site, cannot change state without the token, cannot make it read files or send secrets
 * elsewhere; malformed input is a 4xx with a message, never a 500.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DETECTIONS } from '../../apps/index.js';
import { createQuerySlots, startHttpApi, type HttpApi } from '../../cli/http-api.js';
import { createMetrics } from '../../cli/metrics.js';
import { savedQuery } from '../../cli/results.js';
import { createLogger, loadDeployment, projectRoot, silentLogger } from '../../core/index.js';
import { resolveFfmpegPath } from '../../ingest/index.js';
import { createChdbSink, type ResultSink } from '../../sinks/index.js';

const TOKEN = 'hostile-suite-token-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'panoptes-hostile-http-'));
const outside = mkdtempSync(join(tmpdir(), 'panoptes-hostile-outside-'));
const written = join(outside, 'written.txt');
let api: HttpApi;
let sink: ResultSink;
let logged = '';

beforeAll(async () => {
  const clip = join(dir, 'clip.mp4');
  execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=64x48:rate=5', '-t', '1', '-pix_fmt', 'yuv420p', clip]);
  writeFileSync(join(outside, 'secret.mp4'), 'not a video');
  symlinkSync(join(outside, 'secret.mp4'), join(dir, 'link.mp4'));
  const file = join(dir, 'deployment.yaml');
  writeFileSync(file, `models: ${join(projectRoot(), 'configs/models.yaml')}\napps: [${join(projectRoot(), 'configs/apps/traffic.yaml')}]\nsources:\n  - { id: cam, path: ${clip}, apps: [traffic] }\n`);
  const config = loadDeployment(file);
  const writer = createChdbSink({ path: join(dir, 'clickhouse'), logger: silentLogger() });
  await writer.ensureTables([DETECTIONS]);
  await writer.close();
  sink = createChdbSink({ path: join(dir, 'clickhouse'), readOnly: true, logger: silentLogger() });
  const logs = new Writable({ write: (chunk: Buffer, _encoding, done) => void ((logged += chunk.toString()), done()) });
  api = await startHttpApi({
    port: 0,
    logger: createLogger({ level: 'debug', destination: logs }),
    metrics: createMetrics(),
    queries: { sink, savedQuery: () => 'SELECT count() AS n FROM detections' },
    sources: { config, policy: { schemes: ['rtsp', 'http'], directories: [dir], hosts: [] }, token: { token: TOKEN, where: 'the test' } },
    dashboard: true,
    snapshots: join(dir, 'snapshots'),
    requestTimeoutMs: 1_000,
  });
  // A picture, and a "picture" that is a link to a secret outside the folder.
  mkdirSync(join(dir, 'snapshots/traffic/cam'), { recursive: true });
  writeFileSync(join(dir, 'snapshots/traffic/cam/1-0123456789abcdef.jpg'), 'a picture');
  symlinkSync(join(outside, 'secret.mp4'), join(dir, 'snapshots/traffic/cam/2-0123456789abcdef.jpg'));
});
afterAll(async () => {
  await api.close();
  await sink.close();
  rmSync(dir, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

interface Answer {
  status: number;
  body: string;
}

/** A raw request, with any Host, Origin or other header a browser or an attacker would send. */
function send(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  const { hostname, port } = new URL(api.url);
  return new Promise((resolve, reject) => {
    const all = { host: `${hostname}:${port}`, ...headers };
    // An empty Host means none at all: node would otherwise fill in its own.
    const noHost = all.host === '';
    if (noHost) delete (all as Partial<typeof all>).host;
    const req = request({ hostname, port, method, path, headers: all, setHost: !noHost }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
const json = { 'content-type': 'application/json' };
const auth = { ...json, authorization: `Bearer ${TOKEN}` };
const postSource = (source: unknown, headers: Record<string, string> = auth): Promise<Answer> => send('POST', '/sources', headers, JSON.stringify(source));
const errorOf = (answer: Answer): { code: string; message: string } => (JSON.parse(answer.body) as { error: { code: string; message: string } }).error;
const sql = (text: string): string => `/query?sql=${encodeURIComponent(text)}`;

describe('hostile HTTP', () => {
  it('refuses another Host name (DNS rebinding) on every route, and answers its own names', async () => {
    const { port } = new URL(api.url);
    for (const path of ['/health', '/metrics', '/sources', sql('SELECT 1'), '/', '/events', '/openapi.json', '/sources/cam/frame.jpg']) {
      for (const host of [`evil.example:${port}`, 'evil.example', `127.0.0.1.nip.io:${port}`, `localhost:${Number(port) + 1}`]) {
        expect((await send('GET', path, { host })).status, `${host} ${path}`).toBe(403);
      }
      // No Host at all: node's HTTP server refuses it before the API sees it.
      expect((await send('GET', path, { host: '' })).status, path).toBe(400);
    }
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`]) expect((await send('GET', '/health', { host })).status, host).toBe(200);
  });

  it('serves the dashboard with a policy that keeps other sites out of it, and documents every route with the token it needs', async () => {
    const page = await new Promise<{ status: number; csp: string; body: string }>((resolve, reject) => {
      const { hostname, port } = new URL(api.url);
      request({ hostname, port, path: '/' }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, csp: String(res.headers['content-security-policy']), body }));
      })
        .on('error', reject)
        .end();
    });
    expect(page.status).toBe(200);
    expect(page.body).toContain('<script src="/dashboard.js">');
    expect(page.csp).toContain("default-src 'self'");
    expect(page.csp).toContain("frame-ancestors 'none'");
    // Only the fixed files: no path reaches the file system.
    for (const path of ['/../package.json', '/web/dashboard.js', '/vendor/../../package.json', '/%2e%2e/package.json']) expect((await send('GET', path)).status, path).toBe(404);

    const openapi = JSON.parse((await send('GET', '/openapi.json')).body) as { paths: Record<string, Record<string, { security?: unknown[] }>> };
    expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining(['/health', '/ready', '/status', '/sources', '/sources/{id}', '/query', '/apps', '/plan', '/plan/history', '/events', '/sources/{id}/frame.jpg']));
    expect(openapi.paths['/sources']!.post!.security).toEqual([{ token: [] }]);
    expect(openapi.paths['/sources/{id}']!.delete!.security).toEqual([{ token: [] }]);
    expect(openapi.paths['/sources']!.get!.security).toBeUndefined();
  });

  it('says what the live routes lack in a process whose pipeline has not started, and refuses a source id that is a path', async () => {
    expect((await send('GET', '/ready')).status).toBe(503);
    expect(JSON.parse((await send('GET', '/status')).body)).toEqual({ version: expect.any(String), pipeline: 'starting' });
    for (const path of ['/events', '/plan', '/sources/cam/frame.jpg']) expect(errorOf(await send('GET', path)).message, path).toMatch(/has not started yet/);
    expect((await send('GET', '/sources/..%2F..%2Fetc%2Fpasswd/frame.jpg')).status).toBe(400);
    expect((await send('GET', `/sources/${'a'.repeat(200)}/frame`)).status).toBe(400);
    const apps = JSON.parse((await send('GET', '/apps')).body) as { apps: { name: string; queries: { name: string }[] }[] };
    expect(apps.apps.map((a) => a.name)).toEqual(['traffic']);
    expect(apps.apps[0]!.queries.map((q) => q.name)).toContain('traffic.objects_per_class');
  });

  it("serves events' pictures from their folder only: no path out of it, no link out of it", async () => {
    const picture = await send('GET', '/snapshots/traffic/cam/1-0123456789abcdef.jpg');
    expect([picture.status, picture.body]).toEqual([200, 'a picture']);
    expect((await send('GET', '/snapshots/traffic/cam/2-0123456789abcdef.jpg')).status).toBe(404);
    for (const path of ['/snapshots/traffic/cam/..%2F..%2F..%2Fapi-token', '/snapshots/..%2F..%2Fx/cam/1-0123456789abcdef.jpg', '/snapshots/traffic/cam/1-0123456789abcdef.png', '/snapshots/.hidden/cam/1-0123456789abcdef.jpg']) {
      expect((await send('GET', path)).status, path).toBe(400);
    }
    expect((await send('GET', '/snapshots/traffic/cam/9-0123456789abcdef.jpg')).status).toBe(404);
  });

  it('refuses requests from another site: Origin, Sec-Fetch-Site (an <img> or a form on any page)', async () => {
    const { port } = new URL(api.url);
    expect((await send('GET', sql('SELECT 1'), { origin: 'https://evil.example' })).status).toBe(403);
    expect((await send('GET', sql('SELECT 1'), { origin: 'null' })).status).toBe(403);
    expect((await send('GET', sql('SELECT 1'), { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await send('GET', sql('SELECT 1'), { 'sec-fetch-site': 'same-site' })).status).toBe(403);
    expect((await postSource({ id: 'x', path: join(dir, 'clip.mp4'), apps: ['traffic'] }, { ...auth, origin: 'http://evil.example' })).status).toBe(403);
    expect((await send('GET', sql('SELECT 1'), { origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    expect((await send('GET', sql('SELECT 1'), { 'sec-fetch-site': 'none' })).status).toBe(200);
  });

  it('needs the token to change state; a cross-site form (text/plain, urlencoded) is not read at all', async () => {
    const source = { id: 'cam-2', path: join(dir, 'clip.mp4'), apps: ['traffic'] };
    expect((await postSource(source, json)).status).toBe(401);
    expect((await postSource(source, { ...json, authorization: 'Bearer wrong-token-of-the-same-length' })).status).toBe(401);
    expect((await postSource(source, { ...json, authorization: TOKEN })).status).toBe(401);
    expect((await send('DELETE', '/sources/cam')).status).toBe(401);
    expect(errorOf(await postSource(source, json)).message).toContain('Authorization: Bearer');
    expect((await postSource(source, { ...auth, 'content-type': 'text/plain' })).status).toBe(415);
    expect((await postSource(source, { ...auth, 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(415);
    // With the token and JSON, the request passes the guards (this server runs no ingest worker).
    expect((await postSource(source)).status).toBe(503);
  });

  it('keeps API sources to the allowed schemes and directories, without telling which files exist', async () => {
    const refused = [
      { id: 'a', twitch: { channel: 'someone', gqlUrl: 'http://evil.example/gql' }, apps: ['traffic'] },
      { id: 'b', twitch: { channel: 'someone', usherUrl: 'http://evil.example/' }, apps: ['traffic'] },
      { id: 'c', synthetic: { lavfi: `testsrc,format=rgb24[out];[out]split[a][b]`, durationS: 1 }, apps: ['traffic'] },
      { id: 'd', path: '/etc/passwd', apps: ['traffic'] },
      { id: 'e', path: join(dir, '../../etc/passwd'), apps: ['traffic'] },
      { id: 'f', path: 'file:///etc/passwd', apps: ['traffic'] },
      { id: 'g', path: 'concat:/etc/passwd|/etc/hosts', apps: ['traffic'] },
      { id: 'h', path: 'https://evil.example/x.mp4', apps: ['traffic'] },
      { id: 'i', path: join(dir, 'link.mp4'), apps: ['traffic'] },
      { id: 'j', path: join(outside, 'secret.mp4'), apps: ['traffic'] },
      // A scheme without // is a file to the compiler: refused before it looks whether the file exists.
      { id: 'm', path: 'http:../../../../../../../etc/passwd', apps: ['traffic'] },
      { id: 'n', path: 'http:../../../../../../../etc/missing', apps: ['traffic'] },
      { id: 'o', path: 'rtsp://0.0.0.0:8554/cam', listen: true, apps: ['traffic'] },
      // This machine's own services, and a cloud's metadata service, by address or by name.
      { id: 'p', path: 'http://127.0.0.1:8123/?query=SELECT%201', apps: ['traffic'] },
      { id: 'q', path: 'http://169.254.169.254/latest/meta-data/', apps: ['traffic'] },
      { id: 'r', path: 'http://[::1]:8123/x.mp4', apps: ['traffic'] },
      { id: 's', path: 'http://localhost:9092/x.mp4', apps: ['traffic'] },
      { id: 't', path: 'http://[::ffff:127.0.0.1]/x.mp4', apps: ['traffic'] },
      { id: 'u', path: 'http://0x7f000001/x.mp4', apps: ['traffic'] },
      { id: 'v', path: 'rtsp://0.0.0.0:8554/cam', apps: ['traffic'] },
      { id: 'w', path: 'http://does-not-resolve.invalid/x.mp4', apps: ['traffic'] },
    ];
    for (const source of refused) {
      const answer = await postSource(source);
      expect(answer.status, JSON.stringify(source)).toBe(403);
      expect(errorOf(answer).code).toBe('PANOPTES_HTTP_FORBIDDEN');
    }
    // A file outside answers exactly as a missing one does.
    const existing = errorOf(await postSource({ id: 'k', path: join(outside, 'secret.mp4'), apps: ['traffic'] })).message;
    const missing = errorOf(await postSource({ id: 'k', path: join(outside, 'missing.mp4'), apps: ['traffic'] })).message;
    expect(existing).toBe(missing);
    expect(errorOf(await postSource({ id: 'p', path: 'http://127.0.0.1:8123/', apps: ['traffic'] })).message).toContain('127.0.0.1 is this machine or a link-local address; list it in http.sources.hosts');
    expect(errorOf(await postSource({ id: 's', path: 'http://localhost:9092/x.mp4', apps: ['traffic'] })).message).toMatch(/localhost \((127\.0\.0\.1|::1)\) is this machine/);
    // A camera elsewhere passes the policy (this server runs no ingest worker to start it).
    expect((await postSource({ id: 'l', path: 'rtsp://192.0.2.10:8554/cam', apps: ['traffic'] })).status).toBe(503);
  });

  it('closes a request whose body never finishes with a 408, instead of holding its socket', async () => {
    const { hostname, port } = new URL(api.url);
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    const closed = new Promise((resolve) => socket.on('close', resolve));
    socket.write(`POST /query HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"sql"`);
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  it('closes a connection that sends nothing, so idle sockets cannot hold the connection cap', async () => {
    const { hostname, port } = new URL(api.url);
    const started = Date.now();
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.on('close', resolve));
    // requestTimeoutMs is 1 s here (30 s by default); Node's own check would take up to 30 s more.
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('runs a few queries at once and queues some more; past those it answers 429, and the rest are answered', async () => {
    const busy = await startHttpApi({ port: 0, logger: silentLogger(), queries: { sink, savedQuery: () => 'SELECT 1', slots: createQuerySlots({ running: 1, waiting: 1 }) } });
    try {
      const at = (path: string): Promise<Answer> =>
        new Promise((resolve, reject) => {
          const req = request(new URL(path, busy.url), (res) => {
            let text = '';
            res.on('data', (d: Buffer) => (text += d.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          });
          req.on('error', reject);
          req.end();
        });
      const slow = at(sql('SELECT sleepEachRow(0.5) AS s FROM numbers(2)'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const waiting = at(sql('SELECT 1 AS x'));
      await new Promise((resolve) => setTimeout(resolve, 100));
      const refused = await at(sql('SELECT 2 AS x'));
      expect(refused.status).toBe(429);
      expect(errorOf(refused).message).toBe('too many queries at once (1 running, 1 waiting); try again when one has ended');
      expect((await slow).status).toBe(200);
      expect(JSON.parse((await waiting).body)).toEqual([{ x: 1 }]);
      expect(JSON.parse((await at(sql('SELECT 3 AS x'))).body)).toEqual([{ x: 3 }]);

      // A queued query whose client left gives up its place: the next one is queued, not refused.
      const slowAgain = at(sql('SELECT sleepEachRow(0.5) AS s FROM numbers(2)'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const leaving = request(new URL(sql('SELECT 4 AS x'), busy.url));
      leaving.on('error', () => undefined);
      leaving.end();
      await new Promise((resolve) => setTimeout(resolve, 100));
      leaving.destroy();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const queued = at(sql('SELECT 5 AS x'));
      expect((await slowAgain).status).toBe(200);
      expect(JSON.parse((await queued).body)).toEqual([{ x: 5 }]);
    } finally {
      await busy.close();
    }
  });

  it('answers malformed input with a 4xx and a message, never a 500', async () => {
    const cases: [string, string, Record<string, string>, string | undefined][] = [
      ['GET', '/sources/%E0%A4%A', {}, undefined],
      ['DELETE', '/sources/%zz', auth, undefined],
      ['GET', '/query?sql=%', {}, undefined],
      ['GET', '/query?sql=SELECT%201&sql=SELECT%202', {}, undefined],
      ['GET', '/query?sql=SELECT%201&evil=1', {}, undefined],
      ['GET', '/query?saved=../../etc/passwd', {}, undefined],
      ['GET', '/query?sql=SELECT%201&format=xml', {}, undefined],
      ['GET', `/query?sql=${encodeURIComponent('SELECT 1 FORMAT CSV')}`, {}, undefined],
      ['GET', '/query', {}, undefined],
      ['POST', '/query', json, '{"sql": '],
      ['POST', '/query', json, '{"sql": "SELECT 1", "saved": "traffic.x"}'],
      ['POST', '/sources', auth, '{"__proto__": {"admin": true}, "id": "x"}'],
      ['POST', '/sources', auth, '[1, 2, 3]'],
      ['POST', '/sources', auth, '"a string"'],
      ['POST', '/sources', auth, ''],
      ['POST', '/sources', auth, JSON.stringify({ id: 'big', path: 'x'.repeat(70_000) })],
      ['POST', '/sources', auth, JSON.stringify({ id: 'Bad Id!', path: join(dir, 'clip.mp4'), apps: ['traffic'] })],
      ['POST', '/sources', auth, JSON.stringify({ id: 'n', path: join(dir, 'clip.mp4'), apps: ['traffic'], fps: 'fast' })],
      ['POST', '/sources', auth, '{"id": "nested", "x": ' + '['.repeat(5000) + ']'.repeat(5000) + '}'],
      ['PUT', '/sources', auth, '{}'],
      ['GET', '/../../etc/passwd', {}, undefined],
    ];
    for (const [method, path, headers, body] of cases) {
      const answer = await send(method, path, headers, body);
      expect(answer.status, `${method} ${path} ${body?.slice(0, 60) ?? ''}`).toBeGreaterThanOrEqual(400);
      expect(answer.status, `${method} ${path} ${body?.slice(0, 60) ?? ''}`).toBeLessThan(500);
      expect(errorOf(answer).message.length, `${method} ${path}`).toBeGreaterThan(0);
    }
    expect(logged).not.toContain('HTTP request failed');
  });

  it("names a saved query by the app's own queries only, never by a property every object has", () => {
    expect(savedQuery('traffic.crossings')).toContain('SELECT');
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) expect(() => savedQuery(`traffic.${name}`)).toThrow(`app traffic has no query "${name}"`);
    // An app without a query says which it has.
    expect(() => savedQuery('traffic')).toThrow("saved query traffic: name one of app traffic's queries as <app>.<query>; saved queries: traffic.");
  });

  it('/query refuses writes and file access however sent, GET or POST', async () => {
    const outfile = `SELECT 'x' INTO OUTFILE '${written}' TRUNCATE FORMAT TSVRaw`;
    expect((await send('GET', sql(outfile))).status).toBe(403);
    expect((await send('POST', '/query', json, JSON.stringify({ sql: outfile }))).status).toBe(403);
    const environ = await send('GET', sql("SELECT file('/proc/self/environ')"));
    expect(environ.status).toBe(403);
    expect(environ.body).not.toContain('PATH=');
    expect(existsSync(written)).toBe(false);
    expect(JSON.parse((await send('POST', '/query', json, JSON.stringify({ sql: 'SELECT count() AS n FROM detections' }))).body)).toEqual([{ n: 0 }]);
  });

  it('answers queries side by side: a slow one holds no other back, failing ones spoil no others', async () => {
    const started = Date.now();
    const slow = send('GET', sql('SELECT sleepEachRow(0.5) AS s FROM numbers(3)'));
    const answers = await Promise.all(Array.from({ length: 80 }, (_, i) => send('GET', sql(i % 20 < 7 ? ['SELECT * FROM nowhere', 'SELEC 1', "SELECT throwIf(1, 'boom')", 'SELECT 1; SELECT 2'][i % 4]! : `SELECT ${i} AS i`))));
    const othersMs = Date.now() - started;
    expect((await slow).status).toBe(200);
    const slowMs = Date.now() - started;
    expect(slowMs).toBeGreaterThanOrEqual(1400);
    expect(othersMs).toBeLessThan(slowMs - 300);
    answers.forEach((answer, i) => {
      if (i % 20 < 7) expect(answer.status, `query ${i}`).toBe(400);
      else expect(JSON.parse(answer.body), `query ${i}`).toEqual([{ i }]);
    });
  });

  it('never writes the token into a log line or an answer', async () => {
    await postSource({ id: 'x' }, { ...json, authorization: `Bearer ${TOKEN}x` });
    await postSource({ id: 'x', path: `http://user:${TOKEN}@127.0.0.1/x.mp4` });
    const answer = await postSource({ id: 'Bad', path: `http://user:${TOKEN}@127.0.0.1/x.mp4?token=${TOKEN}` });
    expect(answer.body).not.toContain(TOKEN);
    expect(logged).not.toContain(TOKEN);
  });
});
