/**
 * A running `panoptes run … --http-port` and a headless Chromium on its dashboard, for the
 * browser tests and the README's pictures. Chromium is Debian's (`apt-get install chromium`),
 * driven by playwright-core; PANOPTES_CHROMIUM names another binary.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { projectRoot } from '../../core/index.js';

export function chromiumPath(): string | undefined {
  return [process.env.PANOPTES_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => path && existsSync(path));
}

/** A port free on 127.0.0.1 now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface RunningPanoptes {
  url: string;
  /** stdout and stderr so far. */
  output(): string;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `panoptes run <deployment> --http-port` from source and resolves once its pipeline runs. */
export async function startRun(deployment: string, options: { dataDir: string; token: string; timeoutMs?: number }): Promise<RunningPanoptes> {
  const root = projectRoot();
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'cli/main.ts'), 'run', deployment, '--http-port', String(port), '--data-dir', options.dataDir], {
    cwd: root,
    env: { ...process.env, PANOPTES_LOG_LEVEL: 'warn', PANOPTES_API_TOKEN: options.token },
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const url = `http://127.0.0.1:${port}`;
  const running: RunningPanoptes = {
    url,
    output: () => output,
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
  for (const deadline = Date.now() + (options.timeoutMs ?? 60_000); Date.now() < deadline; await new Promise((r) => setTimeout(r, 250))) {
    if (child.exitCode !== null) throw new Error(`panoptes run exited with ${child.exitCode}:\n${output}`);
    const status = await fetch(`${url}/status`).then((r) => r.json() as Promise<{ pipeline: string }>, () => undefined);
    if (status?.pipeline === 'running') return running;
  }
  await running.stop();
  throw new Error(`panoptes run did not start within the time given:\n${output}`);
}

/** The dashboard in a headless Chromium, with every console error and page error it shows. */
export async function openDashboard(url: string, executablePath: string): Promise<{ browser: Browser; page: Page; errors: string[] }> {
  const browser = await chromium.launch({ executablePath, headless: true });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (err) => errors.push(String(err)));
  await page.goto(`${url}/`);
  return { browser, page, errors };
}
