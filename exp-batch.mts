import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runDeployment } from './dist/cli/index.js';
import { compileDeployment, createLogger, deploymentSchema, projectRoot } from './dist/core/index.js';
import { DETECT_APP } from './dist/bench/peer.js';
const logger = createLogger({ level: 'warn' });
const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');
function cpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (user + system) / 1e6 + (Number(fields[13]) + Number(fields[14])) / 100;
}
const variants = process.argv.slice(3).map(Number);
const result: Record<string, string[]> = {};
for (let round = 0; round < Number(process.argv[2]); round++) {
  for (const batch of variants) {
    const dir = mkdtempSync(join(tmpdir(), 'exp-'));
    const deployment = deploymentSchema.parse({ apps: [DETECT_APP], sources: [{ id: 'road', path: clip, apps: ['detect'], speed: 'max' }], backend: batch ? { batch } : {} });
    const config = compileDeployment(deployment, join(root, 'configs/bench.yaml'), { dataDir: join(dir, 'data') });
    let cpu = 0;
    const s = await runDeployment(config, { logger, onIngest: () => (cpu = -cpuSeconds()), beforeClose: async () => { cpu += cpuSeconds(); } });
    const line = `${(s.frames / (s.processingMs / 1000)).toFixed(1)}fps/${((cpu * 1000) / s.frames).toFixed(0)}ms`;
    (result[batch] ??= []).push(line);
    console.log(`batch ${batch || 'profile'}: ${line}`);
  }
}
console.log(JSON.stringify(result));
