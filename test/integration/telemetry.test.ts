import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';

const root = projectRoot();

describe("onnxruntime's telemetry", () => {
  const home = mkdtempSync(join(tmpdir(), 'panoptes-home-'));
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('is off unless the user turns it on: running a model leaves no device id in the home folder and nothing in /tmp', async () => {
    // A process started without ORT_DISABLE_TELEMETRY, as a user's would be.
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
    delete env.ORT_DISABLE_TELEMETRY;
    const script = [
      "const { createOnnxRuntime } = await import('./analyzers/index.ts');",
      "const { silentLogger } = await import('./core/index.ts');",
      'const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1, intraOpThreads: 1 });',
      "await runtime.load({ name: 'centernet', file: 'models/centernet.onnx' });",
      'await runtime.close();',
      'console.log(process.pid);',
    ].join('\n');
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, env });
    const pid = stdout.trim();
    expect(pid).toMatch(/^\d+$/);
    expect(existsSync(join(home, '.cache/Microsoft'))).toBe(false);
    expect(existsSync(`/tmp/mat-debug-${pid}.log`)).toBe(false);
  });
});
