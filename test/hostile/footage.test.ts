/**
 * Hostile footage: a file that is not video, an empty one, and a playlist served over HTTP that
 * names a local file as its segment (what a source added over the API could point at). Each
 * fails its source with a reason; none reads a local file into the results. The playlist case
 * guards the ffmpeg in use: its HLS demuxer refuses a segment of another protocol.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger, type Frame } from '../../core/index.js';
import { createFileSource, resolveFfmpegPath } from '../../ingest/index.js';

const dir = mkdtempSync(join(tmpdir(), 'panoptes-hostile-footage-'));
const secret = join(dir, 'private.ts');
let server: Server;
let base = '';

beforeAll(async () => {
  execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=64x48:rate=5', '-t', '2', '-pix_fmt', 'yuv420p', '-f', 'mpegts', secret]);
  writeFileSync(join(dir, 'garbage.mp4'), Buffer.from(Array.from({ length: 50_000 }, (_, i) => (i * 7919) % 256)));
  writeFileSync(join(dir, 'empty.mp4'), '');
  const playlist = ['#EXTM3U', '#EXT-X-VERSION:3', '#EXT-X-TARGETDURATION:2', '#EXTINF:2.0,', `file://${secret}`, '#EXT-X-ENDLIST', ''].join('\n');
  server = createServer((request, response) => {
    if (request.url === '/stolen.m3u8') response.writeHead(200, { 'content-type': 'application/vnd.apple.mpegurl' }).end(playlist);
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

async function read(path: string): Promise<{ frames: Frame[]; error: string | undefined }> {
  const source = createFileSource({ id: 'cam', path, speed: 'max', loop: false, ffmpegPath: resolveFfmpegPath(), logger: silentLogger() });
  const frames: Frame[] = [];
  try {
    for await (const frame of source.frames()) frames.push(frame);
    return { frames, error: undefined };
  } catch (err) {
    return { frames, error: (err as Error).message };
  }
}

describe('hostile footage', () => {
  it('a playlist over HTTP naming a local file reads nothing from it (ffmpeg refuses the segment)', async () => {
    const { frames, error } = await read(`${base}/stolen.m3u8`);
    expect(frames).toHaveLength(0);
    expect(error).toBeDefined();
    // The same segment read as a local file gives frames: it is the protocol change that is refused.
    expect((await read(secret)).frames.length).toBeGreaterThan(5);
  });

  it('bytes that are not video, and an empty file, fail their source naming the file', async () => {
    for (const name of ['garbage.mp4', 'empty.mp4']) {
      const { frames, error } = await read(join(dir, name));
      expect(frames, name).toHaveLength(0);
      expect(error, name).toContain(name);
    }
  });
});
