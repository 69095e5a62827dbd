import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';
import { chromiumPath, openDashboard, startRun } from '../../tools/screenshots/session.js';

const root = projectRoot();
const clip = join(root, '../shared/footage/person-bicycle-car-detection.gif');
const second = join(root, '../shared/footage/car-detection.mp4');
const browser = chromiumPath();
if (!browser && process.env.PANOPTES_BROWSER_REQUIRED === '1') throw new Error('PANOPTES_BROWSER_REQUIRED=1 but no Chromium: apt-get install chromium, or set PANOPTES_CHROMIUM');
if (!browser) console.warn('dashboard tests skipped: no Chromium (apt-get install chromium, or set PANOPTES_CHROMIUM)');

describe.skipIf(!browser || !existsSync(clip) || !existsSync(second))('the dashboard in a real browser', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-dashboard-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads without console errors, charts a running replay, draws its frames, and shows a source added meanwhile without a reload', { timeout: 240_000 }, async () => {
    const token = 'dashboard-test-token-0123456789';
    const deployment = join(dir, 'deployment.yaml');
    // The traffic app with an SLO no machine busy with other tests misses: what is checked here is
    // the page, and a live frame that misses its SLO is dropped, never drawn.
    const app = join(dir, 'traffic.yaml');
    writeFileSync(app, readFileSync(join(root, 'configs/apps/traffic.yaml'), 'utf8').replace(/^sloMs: \d+$/m, 'sloMs: 20000'));
    writeFileSync(
      deployment,
      [
        `apps: [${app}]`,
        `models: ${join(root, 'configs/models.yaml')}`,
        `http: { sources: { directories: [${dirname(clip)}] } }`,
        'sources:',
        `  - { id: street, path: ${clip}, apps: [traffic], fps: 2, loop: true, speed: 1 }`,
        '',
      ].join('\n'),
    );
    const run = await startRun(deployment, { dataDir: join(dir, 'data'), token });
    const { browser: chromium, page, errors } = await openDashboard(run.url, browser!);
    try {
      await page.locator('#status.live').waitFor({ timeout: 20_000 });
      // A chart drawn from the results: SLO attainment per app, from app_stats.
      await page.locator('#slo-chart .uplot canvas').waitFor({ timeout: 30_000 });
      expect(await page.locator('#slo-chart .u-legend').textContent()).toContain('traffic');
      // The source's newest frame, with boxes, as an image the browser decoded. Slow on a machine busy with other
      // tests (60 s were once not enough in the full run, and 120 s at the app's own SLO of 2 s).
      const frame = page.locator('[data-source="street"] img');
      await expect.poll(() => frame.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth), { timeout: 120_000 }).toBeGreaterThan(0);

      const added = await fetch(`${run.url}/sources`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ id: 'parking', path: second, apps: ['traffic'], fps: 2, loop: true, speed: 1 }),
      });
      expect(added.status).toBe(201);
      await page.locator('[data-source="parking"]').waitFor({ timeout: 15_000 });

      // A saved query, run from the page, drawn as a table.
      await page.selectOption('#saved', { label: 'traffic.objects_per_class' });
      await page.click('#query-form button');
      await page.locator('#query-result tr:nth-child(2)').waitFor({ timeout: 15_000 });
      expect(errors).toEqual([]);
    } finally {
      await chromium.close();
      expect(await run.stop()).toBe(0);
    }
    expect(run.output()).not.toContain(token);
  });
});
