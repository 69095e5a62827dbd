/**
 * Sources added and removed while others run: through the HTTP API (POST and DELETE /sources)
 * and through a reload of the deployment file. The source that is left alone must keep
 * running: its frames stay numbered 0, 1, 2, ... with no restart.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reloadSources } from '../../cli/deployment.js';
import { startHttpApi } from '../../cli/http-api.js';
import { createMetrics } from '../../cli/metrics.js';
import { createMemoryBus, frameContract, loadDeployment, projectRoot, silentLogger, Topics, type Bus, type CompiledConfig, type Frame } from '../../core/index.js';
import { createIngest, resolveFfmpegPath, type Ingest } from '../../ingest/index.js';

let dir: string;
let clip: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'panoptes-sources-'));
  clip = join(dir, 'clip.mp4');
  execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=160x90:rate=10', '-t', '2', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', clip]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A deployment file whose sources are looped replays of the clip at real time, 5 fps. */
function writeDeployment(ids: string[], fps = 5, more = ''): string {
  const file = join(dir, 'deployment.yaml');
  const sources = ids.map((id) => `  - { id: ${id}, path: ${clip}, apps: [traffic], fps: ${fps}, loop: true, speed: 1 }`).join('\n');
  writeFileSync(file, `models: ${join(projectRoot(), 'configs/models.yaml')}\napps: [${join(projectRoot(), 'configs/apps/traffic.yaml')}]\nsources:\n${sources}\n${more}`);
  return file;
}

/** An ingest worker on a memory bus, with every frame it publishes collected by source. */
async function startIngest(): Promise<{ bus: Bus; ingest: Ingest; frames: Map<string, Frame[]> }> {
  const bus = createMemoryBus();
  await bus.createTopics([{ name: Topics.frames, partitions: 1 }]);
  const frames = new Map<string, Frame[]>();
  await bus.consumer({ groupId: 'reader', topics: [Topics.frames] }).run(async (batch) => {
    for (const message of batch.messages) {
      const frame = frameContract.decode(message.value);
      frames.set(frame.source, [...(frames.get(frame.source) ?? []), frame]);
    }
  });
  return { bus, ingest: createIngest({ bus, dataDir: dir, logger: silentLogger() }), frames };
}

async function until(condition: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const seqs = (frames: Frame[] | undefined): number[] => (frames ?? []).map((f) => f.seq);
const numberedFromZero = (frames: Frame[] | undefined): boolean => seqs(frames).every((seq, i) => seq === i);

describe('sources added and removed while running', () => {
  it('through the HTTP API: POST starts one, DELETE stops it, bad input is refused naming the key; the other source runs on', async () => {
    const config: CompiledConfig = loadDeployment(writeDeployment(['cam-a'], 5, 'http: { sources: { maxRunning: 2 } }\n'));
    const { bus, ingest, frames } = await startIngest();
    const metrics = createMetrics();
    const token = 'a-token-for-this-test-only';
    const policy = { schemes: ['http'], directories: [dir], hosts: ['127.0.0.1'] };
    const server = await startHttpApi({ metrics, port: 0, logger: silentLogger(), sources: { config, policy, token: { token, where: 'the test' } } });
    server.attach(ingest);
    const headers = { authorization: `Bearer ${token}` };
    const post = (body: string): Promise<Response> => fetch(`${server.url}/sources`, { method: 'POST', body, headers: { ...headers, 'content-type': 'application/json' } });
    try {
      ingest.add(config.sources[0]!);
      await until(() => (frames.get('cam-a')?.length ?? 0) >= 3, 'cam-a frames');

      const added = await post(JSON.stringify({ id: 'cam-b', path: clip, apps: ['traffic'], fps: 5, loop: true, speed: 1 }));
      expect(added.status).toBe(201);
      expect(((await added.json()) as { source: { id: string } }).source.id).toBe('cam-b');
      await until(() => (frames.get('cam-b')?.length ?? 0) >= 3, 'cam-b frames');
      expect(frames.get('cam-b')![0]!.apps).toEqual(['traffic']);

      // Every problem is named by its key.
      const bad = await post(JSON.stringify({ id: 'cam-c', path: join(dir, 'nowhere.mp4'), apps: ['billboard'], fps: 5, sample: { everyNth: 2 } }));
      expect(bad.status).toBe(400);
      const message = ((await bad.json()) as { error: { message: string } }).error.message;
      expect(message).toContain('sample');
      expect((await post(JSON.stringify({ id: 'cam-c', path: join(dir, 'nowhere.mp4'), apps: ['billboard'] }))).status).toBe(400);
      expect((await post(JSON.stringify({ id: 'cam-b', path: clip, apps: ['traffic'] }))).status).toBe(409);

      const listed = (await (await fetch(`${server.url}/sources`)).json()) as { sources: { id: string; state: string; published: number; received: number; sampled: number; latencyP50Ms: number }[] };
      expect(listed.sources.map((s) => s.id)).toEqual(['cam-a', 'cam-b']);
      const a = listed.sources[0]!;
      // 10 fps decoded, 5 sampled: about twice as many received as sampled.
      expect(a.received).toBeGreaterThanOrEqual(a.sampled);
      expect(a.sampled).toBeGreaterThanOrEqual(a.published);
      expect(a.latencyP50Ms).toBeGreaterThanOrEqual(0);
      expect(await (await fetch(`${server.url}/metrics`)).text()).toContain('panoptes_source_frames_total{source="cam-b",stage="published"}');

      const removed = await fetch(`${server.url}/sources/cam-b`, { method: 'DELETE', headers });
      expect(removed.status).toBe(200);
      expect(((await removed.json()) as { frames: number }).frames).toBeGreaterThanOrEqual(3);
      expect((await fetch(`${server.url}/sources/cam-b`, { method: 'DELETE', headers })).status).toBe(404);
      const countB = frames.get('cam-b')!.length;
      const countA = frames.get('cam-a')!.length;
      await until(() => frames.get('cam-a')!.length >= countA + 3, 'cam-a frames after the removal');
      expect(frames.get('cam-b')!.length).toBe(countB);
      expect(ingest.metrics().find((s) => s.id === 'cam-b')?.state).toBe('removed');
      expect(numberedFromZero(frames.get('cam-a'))).toBe(true);
      expect(numberedFromZero(frames.get('cam-b'))).toBe(true);

      // A failed source's error is served, without the credentials its URL held.
      expect((await post(JSON.stringify({ id: 'cam-d', path: 'http://admin:s3cretpw@127.0.0.1:9/x.mp4?token=abcdef123', apps: ['traffic'] }))).status).toBe(201);
      await until(() => ingest.metrics().find((s) => s.id === 'cam-d')?.state === 'failed', 'cam-d to fail');
      const served = await (await fetch(`${server.url}/sources`)).text();
      expect(served).toContain('cam-d');
      expect(served).not.toMatch(/s3cretpw|abcdef123/);

      // cam-a runs (cam-b was removed, cam-d failed): one more makes the most this deployment takes.
      expect((await post(JSON.stringify({ id: 'cam-e', path: clip, apps: ['traffic'], loop: true, speed: 1 }))).status).toBe(201);
      const over = await post(JSON.stringify({ id: 'cam-f', path: clip, apps: ['traffic'], loop: true, speed: 1 }));
      expect(over.status).toBe(429);
      expect(((await over.json()) as { error: { message: string } }).error.message).toContain('2 sources are running, the most this deployment takes (http.sources.maxRunning)');
      expect(ingest.metrics().some((s) => s.id === 'cam-f')).toBe(false);
    } finally {
      await server.close();
      await ingest.close();
      await bus.close();
    }
  }, 60_000);

  it('through a reload of the deployment file: new ids start, missing ones stop, changed ones restart, the rest run on', async () => {
    const config = loadDeployment(writeDeployment(['cam-a', 'cam-b', 'cam-c']));
    const { bus, ingest, frames } = await startIngest();
    try {
      for (const source of config.sources) ingest.add(source, 'file');
      // Added through the API: not the file's to stop.
      ingest.add({ ...config.sources[0]!, id: 'cam-api' });
      await until(() => ['cam-a', 'cam-b', 'cam-c', 'cam-api'].every((id) => (frames.get(id)?.length ?? 0) >= 2), 'frames of all four');

      // cam-a unchanged, cam-b at another rate, cam-c gone, cam-d new.
      writeFileSync(
        config.file,
        `models: ${join(projectRoot(), 'configs/models.yaml')}\napps: [${join(projectRoot(), 'configs/apps/traffic.yaml')}]\nsources:\n` +
          `  - { id: cam-a, path: ${clip}, apps: [traffic], fps: 5, loop: true, speed: 1 }\n` +
          `  - { id: cam-b, path: ${clip}, apps: [traffic], fps: 2, loop: true, speed: 1 }\n` +
          `  - { id: cam-d, path: ${clip}, apps: [traffic], fps: 5, loop: true, speed: 1 }\n`,
      );
      const countA = frames.get('cam-a')!.length;
      const countB = frames.get('cam-b')!.length;
      await reloadSources(config, ingest, silentLogger());
      await until(() => (frames.get('cam-d')?.length ?? 0) >= 2 && frames.get('cam-b')!.length >= countB + 2 && frames.get('cam-a')!.length >= countA + 3, 'frames after the reload');

      const states = Object.fromEntries(ingest.metrics().map((s) => [s.id, s.state]));
      expect(states).toMatchObject({ 'cam-a': 'running', 'cam-b': 'running', 'cam-d': 'running', 'cam-c': 'removed', 'cam-api': 'running' });
      expect(numberedFromZero(frames.get('cam-a'))).toBe(true);
      // cam-b restarted: its numbering starts again at 0 after the reload.
      const restartedAt = frames.get('cam-b')!.findIndex((f, i) => i > 0 && f.seq === 0);
      expect(restartedAt).toBeGreaterThan(0);

      // A file that no longer parses changes nothing.
      writeFileSync(config.file, 'sources: [ {id: broken\n');
      await reloadSources(config, ingest, silentLogger());
      expect(ingest.metrics().filter((s) => s.state === 'running').map((s) => s.id)).toEqual(['cam-a', 'cam-api', 'cam-b', 'cam-d']);
    } finally {
      await ingest.close();
      await bus.close();
    }
  }, 60_000);

  it('a replay that played through is not played again by a reload unless the file changed it; the summary counts both runs', async () => {
    const deployment = (fps: number): string => {
      const file = writeDeployment([], fps);
      writeFileSync(file, readFileSync(file, 'utf8').replace('sources:\n', `sources:\n  - { id: once, path: ${clip}, apps: [traffic], fps: ${fps}, speed: max }\n`));
      return file;
    };
    const config = loadDeployment(deployment(5));
    const { bus, ingest } = await startIngest();
    await bus.createTopics([{ name: Topics.backfillFrames, partitions: 1 }]);
    // Replays at full speed go to the backfill topic: counted as published.
    const published = (): number => ingest.metrics().find((s) => s.id === 'once')!.published;
    try {
      ingest.add(config.sources[0]!, 'file');
      await ingest.idle();
      const played = published();
      expect(played).toBeGreaterThan(5);
      expect(await ingest.reconcile(loadDeployment(config.file).sources)).toEqual({ added: [], removed: [], restarted: [] });
      expect(ingest.metrics().find((s) => s.id === 'once')).toMatchObject({ state: 'ended', published: played });

      deployment(2);
      expect(await ingest.reconcile(loadDeployment(config.file).sources)).toEqual({ added: ['once'], removed: [], restarted: [] });
      await ingest.idle();
      const second = published();
      expect(second).toBeGreaterThan(1);
      expect(second).toBeLessThan(played);
      const outcome = (await ingest.close()).find((r) => r.id === 'once');
      expect(outcome?.frames).toBe(played + second);
    } finally {
      await ingest.close();
      await bus.close();
    }
  }, 60_000);
});
