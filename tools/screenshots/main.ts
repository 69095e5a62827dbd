/**
 * The README's pictures, made from the shared footage: the dashboard with the demo's apps on
 * four of the clips, looping in real time (`docs/images/dashboard.png`), and the frame of
 * `person-bicycle-car` with the most objects found in that time, drawn on it
 * (`docs/images/annotated-frame.jpg`). `npm run screenshots`; needs Chromium and ../shared/footage.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../core/index.js';
import { chromiumPath, openDashboard, startRun } from './session.js';

const SOURCE = 'person-bicycle-car';
const WARM_UP_MS = 40_000;

function deployment(root: string): string {
  const footage = join(root, '../shared/footage');
  const source = (id: string, file: string, app: string, fps: number): string => `  - { id: ${id}, path: ${join(footage, file)}, apps: [${app}], fps: ${fps}, loop: true, speed: 1 }`;
  return [
    `models: ${join(root, 'configs/models.yaml')}`,
    `apps: [${join(root, 'configs/apps/traffic.yaml')}, ${join(root, 'configs/apps/billboard.yaml')}]`,
    'sources:',
    source('car-detection', 'car-detection.mp4', 'traffic', 2),
    source(SOURCE, 'person-bicycle-car-detection.gif', 'traffic', 4),
    source('lobby', 'one-by-one-person-detection.mp4', 'billboard', 2),
    source('walkway', 'face-demographics-walking.gif', 'billboard', 4),
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const browser = chromiumPath();
  if (!browser) throw new Error('no Chromium: apt-get install chromium, or set PANOPTES_CHROMIUM');
  const root = projectRoot();
  const images = join(root, 'docs/images');
  mkdirSync(images, { recursive: true });
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-screenshots-'));
  const file = join(dataDir, 'deployment.yaml');
  writeFileSync(file, deployment(root));
  const run = await startRun(file, { dataDir, token: 'screenshots' });
  try {
    const { browser: chromium, page, errors } = await openDashboard(run.url, browser);
    try {
      process.stderr.write(`demo running at ${run.url}; waiting ${WARM_UP_MS / 1000} s for the charts to fill\n`);
      // The annotated frame: of the source's newest frames in that time, the one with most objects.
      let most = 0;
      for (const deadline = Date.now() + WARM_UP_MS; Date.now() < deadline; await new Promise((r) => setTimeout(r, 250))) {
        const frame = (await fetch(`${run.url}/sources/${SOURCE}/frame`).then((r) => (r.ok ? r.json() : undefined))) as { objects: unknown[] } | undefined;
        if (!frame || frame.objects.length <= most) continue;
        most = frame.objects.length;
        writeFileSync(join(images, 'annotated-frame.jpg'), Buffer.from(await (await fetch(`${run.url}/sources/${SOURCE}/frame.jpg`)).arrayBuffer()));
      }
      if (most === 0) throw new Error(`no frame of ${SOURCE} with objects on it in ${WARM_UP_MS / 1000} s`);
      await page.selectOption('#saved', { label: 'traffic.objects_per_class' });
      await page.click('#query-form button');
      await page.locator('#query-result tr:nth-child(2)').waitFor();
      await page.screenshot({ path: join(images, 'dashboard.png'), fullPage: true });
      if (errors.length > 0) throw new Error(`the page logged errors: ${errors.join('; ')}`);
    } finally {
      await chromium.close();
    }
  } finally {
    await run.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  process.stderr.write(`wrote ${join(images, 'dashboard.png')} and ${join(images, 'annotated-frame.jpg')}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`screenshots: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
