/**
 * Hostile configuration and the secrets in it: a YAML file built to exhaust memory or the stack
 * is refused as a config error naming the file; credentials and tokens never reach a log line,
 * an error or a summary.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger, deploymentSchema, ErrorCode, loadConfigFile, PanoptesError, projectRoot, redact, redactUrl } from '../../core/index.js';

const dir = mkdtempSync(join(tmpdir(), 'panoptes-hostile-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configError(text: string): PanoptesError {
  const file = join(dir, `case-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, text);
  try {
    loadConfigFile(deploymentSchema, file);
  } catch (err) {
    expect(err).toBeInstanceOf(PanoptesError);
    expect((err as PanoptesError).code).toBe(ErrorCode.ConfigInvalid);
    expect((err as PanoptesError).message).toContain(file);
    return err as PanoptesError;
  }
  throw new Error('expected a config error');
}

describe('hostile configuration', () => {
  it('refuses a YAML alias bomb ("billion laughs") without expanding it', () => {
    const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 9; i++) {
      const [name, previous] = [String.fromCharCode(97 + i), String.fromCharCode(96 + i)];
      levels.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(',')}]`);
    }
    const started = Date.now();
    expect(configError(`${levels.join('\n')}\nsources: *i\napps: [x]\n`).message).toMatch(/alias/i);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('refuses deep nesting, unknown keys (also __proto__), wrong types and absurd numbers, naming each', () => {
    expect(configError(`apps: [x]\nsources: ${'['.repeat(2000)}${']'.repeat(2000)}\n`).message).toMatch(/yaml:2: .*YAML/);
    expect(configError('__proto__: { polluted: true }\napps: [x]\nsources: [{ id: a, path: a.mp4 }]\n').message).toMatch(/__proto__/);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const numbers = configError('apps: [x]\nsources: [{ id: a, path: a.mp4, fps: 1e308, width: -5, speed: .nan }]\n').message;
    for (const key of ['fps', 'width', 'speed']) expect(numbers).toContain(key);
    expect(configError('apps: [x]\nsources: [{ id: "../../etc", path: a.mp4 }]\n').message).toMatch(/id/);
  });
});

describe('secrets', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('redact() removes URL credentials, secret query parameters, Authorization values and secret variables', () => {
    process.env.PANOPTES_TWITCH_OAUTH_TOKEN = 'oauth-secret-value';
    process.env.PANOPTES_CLICKHOUSE_URL = 'http://writer:ch-pass-123@db.internal:8123';
    const text = redact(
      'cannot reach http://writer:ch-pass-123@db.internal:8123/?database=x (and rtsp://cam:pw@10.0.0.5/live), ' +
        'GET /x?token=abc123&sig=def&channel=c, Authorization: OAuth oauth-secret-value, Bearer abcdefgh; pw ch-pass-123',
    );
    for (const secret of ['ch-pass-123', 'writer:', 'cam:pw', 'abc123', 'def&', 'oauth-secret-value', 'abcdefgh']) expect(text).not.toContain(secret);
    expect(text).toContain('db.internal:8123');
    expect(text).toContain('channel=c');
    expect(redactUrl('https://u:p@usher.example/x.m3u8?sig=1')).toBe('https://usher.example/x.m3u8?<redacted>');
  });

  it("redact() removes signed URLs' signatures and credentials, whatever prefix their names carry", () => {
    const signed =
      'https://bucket.s3.example/clip.mp4?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261129&X-Amz-Security-Token=tok3n&X-Amz-Signature=5ca1ab1e&X-Amz-Expires=600';
    const text = redact(`cannot open ${signed}: 403 Forbidden; also https://storage.example/o?X-Goog-Signature=g00gsig&GoogleAccessId=svc#frag`);
    for (const secret of ['AKIAEXAMPLE', 'tok3n', '5ca1ab1e', 'g00gsig']) expect(text).not.toContain(secret);
    expect(text).toContain('X-Amz-Expires=600');
    // A password with a raw @ (ffmpeg splits at the last one), and tokens by other names.
    const camera = redact('reconnecting to rtsp://admin:P@ssw0rd-Secret@10.0.0.5:554/live and http://u:a@b@h/x?jwt=eyJhbGciOi&session=s3ss&code=0auth');
    for (const secret of ['ssw0rd-Secret', 'admin', 'a@b', 'eyJhbGciOi', 's3ss', '0auth']) expect(camera).not.toContain(secret);
    expect(camera).toContain('@10.0.0.5:554/live');
    expect(redact('mail a@b.example about http://host/p?who=a@b.example')).toBe('mail a@b.example about http://host/p?who=a@b.example');
    expect(text).toContain('403 Forbidden');
  });

  it('every log line passes through it, whatever a module logs', () => {
    let out = '';
    const logger = createLogger({ level: 'info', destination: new Writable({ write: (chunk: Buffer, _e, done) => void ((out += chunk.toString()), done()) }) });
    logger.warn({ url: 'http://admin:hunter22@127.0.0.1:8123', err: new Error('failed at rtsp://cam:campw@127.0.0.1/live') }, 'insert failed for http://admin:hunter22@x');
    expect(out).toContain('insert failed');
    expect(out).not.toContain('hunter22');
    expect(out).not.toContain('campw');
  });

  it('`panoptes query --url` with credentials prints an error without them', async () => {
    const run = promisify(execFile)(process.execPath, ['--import', 'tsx', join(projectRoot(), 'cli/main.ts'), 'query', 'SELECT 1', '--url', 'http://reader:s3cret-pw@127.0.0.1:9/'], { cwd: projectRoot() });
    const err = (await run.then(() => undefined, (e: unknown) => e)) as { code: number; stderr: string };
    expect(err.code).toBe(1);
    expect(err.stderr).toMatch(/^panoptes: /);
    expect(err.stderr).not.toContain('s3cret-pw');
  });
});
