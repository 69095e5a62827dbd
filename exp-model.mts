import { join } from 'node:path';
import { createOnnxRuntime, decodeJpeg, loadModelRunner, type RgbImage } from './dist/analyzers/index.js';
import { compileDeployment, createLogger, deploymentSchema, projectRoot } from './dist/core/index.js';
import { createFileSource } from './dist/ingest/index.js';
import { DETECT_APP } from './dist/bench/peer.js';
const logger = createLogger({ level: 'warn' });
const root = projectRoot();
const clip = join(root, '../shared/footage/car-detection.mp4');
const config = compileDeployment(deploymentSchema.parse({ apps: [DETECT_APP], sources: [{ id: 'road', path: clip, apps: ['detect'] }] }), join(root, 'configs/bench.yaml'), { dataDir: '/tmp/expm' });
const images: RgbImage[] = [];
for await (const frame of createFileSource({ id: 'road', path: clip, speed: 'max', loop: false, logger }).frames()) { images.push(await decodeJpeg(frame.jpeg)); if (images.length === 6) break; }
const runtime = createOnnxRuntime({ logger });
const runner = await loadModelRunner(config.models.centernet!, runtime);
const params = runner.parseParams(config.apps.detect!.nodes[0]!.params);
const FRAMES = 120;
const out: Record<number, string[]> = {};
for (let round = 0; round < 3; round++) for (const batch of [1, 2, 3]) {
  const prepared = () => runner.prepare(images.slice(0, batch), images.slice(0, batch).map(() => params));
  const inputs = await Promise.all(Array.from({ length: FRAMES / batch + 1 }, prepared));
  await runner.execute(inputs.pop()!);
  const t = performance.now(); const c = process.cpuUsage();
  for (let input = inputs.pop(); input; input = inputs.pop()) await runner.execute(input);
  const ms = performance.now() - t; const cu = process.cpuUsage(c);
  (out[batch] ??= []).push(`${(FRAMES / (ms / 1000)).toFixed(1)}fps/${((cu.user + cu.system) / 1000 / FRAMES).toFixed(0)}ms`);
}
console.log(JSON.stringify(out));
await runner.dispose(); await runtime.close();
