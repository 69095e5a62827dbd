/**
 * The pipeline storing into a real ClickHouse server (Debian's 18.16 in CI): replaying the same
 * footage twice into one database leaves every saved query's answer as it was.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDeployment } from '../../cli/deployment.js';
import { appSpecSchema, compileDeployment, deploymentSchema, loadConfigFile, projectRoot, silentLogger } from '../../core/index.js';
import type { QueryResult } from '../../sinks/index.js';
import { serverAddress, serverSkipReason } from '../servers.js';

const clip = join(projectRoot(), '../shared/footage/car-detection.mp4');
const skipReason = serverSkipReason('clickhouse') ?? (existsSync(clip) ? undefined : `${clip} is missing`);
const savedQueries = loadConfigFile(appSpecSchema, join(projectRoot(), 'configs/apps/traffic.yaml')).queries;

describe.skipIf(skipReason !== undefined)('pipeline into a ClickHouse server', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-server-sink-'));
  const database = `panoptes_replay_${randomUUID().slice(0, 8)}`;
  afterAll(async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await fetch(serverAddress('clickhouse') ?? '', { method: 'POST', body: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  });

  /** Replays the clip into the database; returns every saved query's answer and the frames stored. */
  async function replay(): Promise<{ answers: Record<string, QueryResult['rows']>; frames: number; published: number }> {
    const deployment = deploymentSchema.parse({
      apps: ['apps/traffic.yaml'],
      sources: [{ id: 'road', path: clip, apps: ['traffic'], fps: 2 }],
      sink: { kind: 'clickhouse', url: serverAddress('clickhouse'), database },
    });
    const config = compileDeployment(deployment, join(projectRoot(), 'configs/test.yaml'), { dataDir });
    const answers: Record<string, QueryResult['rows']> = {};
    let frames = 0;
    const summary = await runDeployment(config, {
      logger: silentLogger(),
      beforeClose: async (sink) => {
        for (const [name, sql] of Object.entries(savedQueries)) answers[name] = (await sink.query(sql)).rows;
        // Frame times come from the file, not the wall clock, so they too are the same each time.
        answers.times = (await sink.query("SELECT toString(min(frame_time)) AS first, toString(max(frame_time)) AS last FROM frames WHERE source = 'road'")).rows;
        frames = Number((await sink.query("SELECT count() AS n FROM frames WHERE source = 'road'")).rows[0]?.n);
      },
    });
    return { answers, frames, published: summary.sources[0]?.frames ?? 0 };
  }

  it('stores every frame, and a second replay changes no saved query', async () => {
    const first = await replay();
    expect(first.published).toBeGreaterThanOrEqual(60);
    expect(first.frames).toBe(first.published);
    expect(first.answers.objects_per_class?.length).toBeGreaterThan(0);
    const second = await replay();
    expect(second.frames).toBe(first.frames);
    expect(second.answers).toEqual(first.answers);
  }, 180_000);
});
