/**
 * A live camera over HTTP on 127.0.0.1 (MPEG-TS from a looped clip, one ffmpeg per client, as
 * IP cameras serve it) that dies and comes back: the live source reconnects with backoff, its
 * frames go on numbered and stamped with the wall clock, and the reconnect time is measured.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus, frameContract, silentLogger, sourceSchema, Topics, type Frame } from '../../core/index.js';
import { createLiveSource, resolveFfmpegPath, runIngest } from '../../ingest/index.js';
import { freePort } from '../helpers.js';

const ffmpeg = resolveFfmpegPath();
let dir: string;
let clip: string;

/** An HTTP camera: each client gets its own ffmpeg streaming the clip in real time, forever. */
function camera(port = 0): Promise<{ server: Server; port: number; kill(): void }> {
  const children = new Set<ChildProcess>();
  const sockets = new Set<Socket>();
  const server = createServer((_, res) => {
    const child = spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-re', '-stream_loop', '-1', '-i', clip, '-c', 'copy', '-f', 'mpegts', 'pipe:1'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.add(child);
    res.writeHead(200, { 'content-type': 'video/mp2t' });
    child.stdout!.pipe(res);
    res.on('close', () => child.kill('SIGKILL'));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  return new Promise((resolve) =>
    server.listen(port, '127.0.0.1', () =>
      resolve({
        server,
        port: (server.address() as AddressInfo).port,
        kill() {
          server.close();
          for (const s of sockets) s.destroy();
          for (const c of children) c.kill('SIGKILL');
        },
      }),
    ),
  );
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'panoptes-live-'));
  clip = join(dir, 'cam.mp4');
  execFileSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=160x90:rate=10', '-t', '4', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', '10', clip]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a live source', () => {
  it('reconnects with backoff when the camera dies and comes back, frames numbered on and stamped now', async () => {
    let cam = await camera();
    const port = cam.port;
    const source = createLiveSource({ id: 'cam', url: `http://127.0.0.1:${port}/live`, fps: 5, stallMs: 5000, backoff: { initialMs: 100, maxMs: 1000, jitter: 0.2 } });
    const frames: Frame[] = [];
    let restartedAt = 0;
    let reconnectMs = 0;
    try {
      for await (const frame of source.frames()) {
        frames.push(frame);
        expect(Math.abs(frame.captureTimeMs - Date.now())).toBeLessThan(1000);
        if (frames.length === 5) {
          cam.kill();
          // Down for 2 s: several attempts are refused meanwhile.
          setTimeout(() => void camera(port).then((c) => ((cam = c), (restartedAt = Date.now()))), 2000);
        }
        if (restartedAt > 0 && reconnectMs === 0) reconnectMs = Date.now() - restartedAt;
        if (frames.length === 10) break;
      }
    } finally {
      await source.stop();
      cam.kill();
    }
    expect(frames.map((f) => f.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const status = source.status();
    expect(status.reconnects).toBeGreaterThanOrEqual(2);
    // 10 fps decoded, 5 sampled; the 2 s outage counted as time down.
    expect(status.framesDecoded).toBeGreaterThanOrEqual(status.framesEmitted);
    expect(status.downtimeMs).toBeGreaterThanOrEqual(2000);
    expect(status.nativeFps).toBe(10);
    expect(reconnectMs).toBeGreaterThan(0);
    console.log(`reconnected ${reconnectMs} ms after the camera came back (${source.status().reconnects} reconnects)`);
  }, 60_000);

  it.each([
    ['rtsp', (port: number) => `rtsp://127.0.0.1:${port}/cam`, ['-f', 'rtsp', '-rtsp_transport', 'tcp'], 'tcp'],
    ['rtsp over udp', (port: number) => `rtsp://127.0.0.1:${port}/cam`, ['-f', 'rtsp', '-rtsp_transport', 'udp'], 'udp'],
    ['rtmp', (port: number) => `rtmp://127.0.0.1:${port}/live/cam`, ['-f', 'flv'], undefined],
  ] as const)('listens for a camera that pushes %s, and again after the camera drops', async (_, url, format, rtspTransport) => {
    const port = await freePort();
    const push = (): ChildProcess =>
      spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-re', '-stream_loop', '-1', '-i', clip, '-c', 'copy', ...format, url(port)], { stdio: 'ignore' });
    const source = createLiveSource({ id: 'pushed', url: url(port), listen: true, ...(rtspTransport ? { rtspTransport } : {}), fps: 5, backoff: { initialMs: 100, maxMs: 1000, jitter: 0.2 } });
    const frames: Frame[] = [];
    // ffmpeg listens only once the source is iterated; the camera retries until it gets through, as cameras do.
    let camera: ChildProcess | undefined;
    let cameraBackAt = 0;
    let reconnectMs = 0;
    const keepPushing = setInterval(() => {
      if (!camera || camera.exitCode !== null) camera = push();
    }, 300);
    try {
      for await (const frame of source.frames()) {
        frames.push(frame);
        if (frames.length === 5) {
          clearInterval(keepPushing);
          camera?.kill('SIGKILL');
          setTimeout(() => {
            cameraBackAt = Date.now();
            const retry = setInterval(() => {
              if (camera?.exitCode !== null || camera.signalCode !== null) camera = push();
              if (frames.length > 5) clearInterval(retry);
            }, 300);
          }, 1000);
        }
        if (cameraBackAt > 0 && reconnectMs === 0) reconnectMs = Date.now() - cameraBackAt;
        if (frames.length === 10) break;
      }
    } finally {
      clearInterval(keepPushing);
      await source.stop();
      camera?.kill('SIGKILL');
    }
    expect(frames.map((f) => f.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(source.status().reconnects).toBeGreaterThanOrEqual(1);
    console.log(`${_}: frames again ${reconnectMs} ms after the camera pushed again`);
  }, 60_000);

  it('runs as a deployment source (`live: true`) until stopped, publishing its frames', async () => {
    const cam = await camera();
    const bus = createMemoryBus();
    const stop = new AbortController();
    const published: Frame[] = [];
    try {
      await bus.createTopics([{ name: Topics.frames, partitions: 1 }]);
      await bus.consumer({ groupId: 'reader', topics: [Topics.frames] }).run(async (batch) => {
        published.push(...batch.messages.map((m) => frameContract.decode(m.value)));
      });
      const source = sourceSchema.parse({ id: 'http-cam', path: `http://127.0.0.1:${cam.port}/live`, live: true, apps: ['traffic'], fps: 5 });
      const results = await runIngest({
        bus,
        sources: [source],
        dataDir: dir,
        logger: silentLogger(),
        signal: stop.signal,
        onProgress: (frames, total) => {
          expect(total).toBeUndefined();
          if (frames >= 3) stop.abort();
        },
      });
      expect(results[0]?.error).toBeUndefined();
      expect(results[0]?.frames).toBeGreaterThanOrEqual(3);
      expect(published.map((f) => f.source).every((s) => s === 'http-cam')).toBe(true);
      expect(published.length).toBeGreaterThanOrEqual(3);
    } finally {
      cam.kill();
      await bus.close();
    }
  }, 60_000);
});
