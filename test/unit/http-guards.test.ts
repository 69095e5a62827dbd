import { mkdtempSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allowedHosts, apiToken, checkSite, checkToken } from '../../cli/http-guards.js';

describe('the Host and Origin a request may carry', () => {
  it('names this server: its address and loopback with its port, never a bare name of its own', () => {
    const hosts = allowedHosts('127.0.0.1', 8081);
    expect(checkSite({ host: '127.0.0.1:8081' }, hosts)).toBeUndefined();
    expect(checkSite({ host: 'localhost:8081', origin: 'http://localhost:8081' }, hosts)).toBeUndefined();
    for (const host of ['localhost', '127.0.0.1', 'localhost:8082', 'evil.example:8081']) expect(checkSite({ host }, hosts), host).toMatch(/is not a name of this server; use localhost:8081 /);
  });

  it('behind a proxy: a name given with 443 (or 80, or no port) matches what a browser sends, the bare name; other sites stay out', () => {
    const hosts = allowedHosts('127.0.0.1', 8081, ['Dash.Example:443', 'plain.example', 'odd.example:8443']);
    expect(checkSite({ host: 'dash.example', origin: 'https://dash.example', 'sec-fetch-site': 'same-origin' }, hosts)).toBeUndefined();
    expect(checkSite({ host: 'dash.example:443' }, hosts)).toBeUndefined();
    expect(checkSite({ host: 'plain.example' }, hosts)).toBeUndefined();
    expect(checkSite({ host: 'plain.example:8081' }, hosts)).toBeUndefined();
    expect(checkSite({ host: 'odd.example:8443' }, hosts)).toBeUndefined();
    expect(checkSite({ host: 'odd.example' }, hosts)).toMatch(/is not a name of this server/);
    expect(checkSite({ host: 'dash.example', origin: 'https://evil.example' }, hosts)).toMatch(/cross-origin/);
    expect(checkSite({ host: 'dash.example.evil.example' }, hosts)).toMatch(/is not a name of this server/);
  });

  it('bound to every interface: each address is accepted, and a refusal lists none of them', () => {
    const hosts = allowedHosts('0.0.0.0', 8081);
    const addresses = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
    for (const address of addresses) expect(hosts.has(address.includes(':') ? `[${address}]:8081` : `${address}:8081`), address).toBe(true);
    const refusal = checkSite({ host: 'evil.example:8081' }, hosts) ?? '';
    expect(refusal).toMatch(/is not a name of this server/);
    for (const address of addresses) expect(refusal).not.toContain(address);
    expect(refusal).not.toContain('127.0.0.1');
  });
});

describe('the API token', () => {
  it('made into the data directory: the operator is told its path, a client refused without it is not', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-token-'));
    try {
      const saved = process.env.PANOPTES_API_TOKEN;
      delete process.env.PANOPTES_API_TOKEN;
      const token = apiToken(dataDir);
      if (saved !== undefined) process.env.PANOPTES_API_TOKEN = saved;
      expect(token.where).toBe(`the file ${join(dataDir, 'api-token')}`);
      const refusal = checkToken('Bearer wrong', token.token, token.hint ?? token.where);
      expect(refusal).toContain("the file api-token in the server's data directory");
      expect(refusal).not.toContain(dataDir);
      expect(checkToken(`Bearer ${token.token}`, token.token, token.where)).toBeUndefined();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
