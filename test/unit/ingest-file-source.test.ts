import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, PanoptesError, silentLogger, type Frame } from '../../core/index.js';
import { createFileSource, ensureSyntheticClip, resolveFfmpegPath, type FileSource, type FileSourceOptions } from '../../ingest/index.js';

const FOOTAGE = fileURLToPath(new URL('../../../shared/footage/car-detection.mp4', import.meta.url));
const hasFootage = existsSync(FOOTAGE);

let dir: string;
let ffmpegPath: string;
const clips = { fourSeconds: '', oneSecond: '', corrupt: '', avs2: '', keyframes: '', scenes: '' };

/** Encodes a synthetic clip with ffmpeg's lavfi test source. */
function makeClip(file: string, seconds: number, codecArgs: string[]): string {
  const path = join(dir, file);
  execFileSync(ffmpegPath, [
    '-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=25',
    '-t', String(seconds), ...codecArgs, path,
  ]);
  return path;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'panoptes-file-source-'));
  ffmpegPath = resolveFfmpegPath();
  const h264 = ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p'];
  clips.fourSeconds = makeClip('four.mp4', 4, h264);
  clips.oneSecond = makeClip('one.mp4', 1, h264);
  // 2 s at 25 fps with a keyframe every 10 frames and none at scene cuts: keyframes 0, 10, ... 40.
  clips.keyframes = makeClip('gop10.mp4', 2, [...h264, '-g', '10', '-keyint_min', '10', '-sc_threshold', '0']);
  // Three flat scenes of 10 frames each (red, green, blue): two cuts, at frames 10 and 20.
  clips.scenes = join(dir, 'scenes.mp4');
  execFileSync(ffmpegPath, [
    '-hide_banner', '-loglevel', 'error',
    '-f', 'lavfi', '-i', 'color=c=red:s=160x90:r=10:d=1',
    '-f', 'lavfi', '-i', 'color=c=green:s=160x90:r=10:d=1',
    '-f', 'lavfi', '-i', 'color=c=blue:s=160x90:r=10:d=1',
    '-filter_complex', '[0][1][2]concat=n=3:v=1', ...h264, clips.scenes,
  ]);

  clips.corrupt = join(dir, 'corrupt.mp4');
  writeFileSync(clips.corrupt, Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => (i * 7919 + 13) % 251)));

  // This ffmpeg build knows the AVS2 codec but has no decoder for it: an AVI whose video is
  // tagged AVS2 (an mpeg4 clip with its fourcc rewritten) is a real "unsupported codec" file.
  const mpeg4 = readFileSync(makeClip('mpeg4.avi', 1, ['-c:v', 'mpeg4', '-vtag', 'XVID']));
  clips.avs2 = join(dir, 'avs2.avi');
  writeFileSync(clips.avs2, Buffer.from(mpeg4.toString('latin1').replaceAll('XVID', 'AVS2'), 'latin1'));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function source(options: Partial<FileSourceOptions> & { path: string }): FileSource {
  return createFileSource({ id: 'cam-test', speed: 'max', loop: false, ...options });
}

/** Reads up to `limit` frames (all when omitted). */
async function collect(src: FileSource, limit = Infinity): Promise<Frame[]> {
  const frames: Frame[] = [];
  if (limit === 0) return frames;
  for await (const frame of src.frames()) {
    frames.push(frame);
    if (frames.length >= limit) break;
  }
  return frames;
}

async function failure(src: FileSource): Promise<PanoptesError> {
  const err: unknown = await collect(src).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PanoptesError);
  return err as PanoptesError;
}

const isJpeg = (bytes: Uint8Array): boolean =>
  bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[bytes.length - 2] === 0xff && bytes[bytes.length - 1] === 0xd9;

describe('createFileSource: sampling and timestamps', () => {
  it('samples a 4 s clip at 5 fps: 20 frames, pts 0, 200, 400 ..., capture = replay start + pts', async () => {
    const replayStartMs = Date.UTC(2024, 0, 1);
    const frames = await collect(source({ path: clips.fourSeconds, fps: 5, replayStartMs }));
    expect(frames).toHaveLength(20);
    frames.forEach((frame, k) => {
      expect(frame.source).toBe('cam-test');
      expect(frame.seq).toBe(k);
      expect(frame.ptsMs).toBe(k * 200);
      expect(frame.captureTimeMs).toBe(replayStartMs + k * 200);
      expect([frame.width, frame.height]).toEqual([320, 240]);
      expect(isJpeg(frame.jpeg)).toBe(true);
    });
  });

  it("stamps the footage's time from the start time given, else the container's creation time, else none (the capture time stands for it)", async () => {
    const dated = join(dir, 'dated.mp4');
    execFileSync(ffmpegPath, ['-hide_banner', '-loglevel', 'error', '-i', clips.oneSecond, '-c', 'copy', '-metadata', 'creation_time=2019-06-01T12:00:00Z', dated]);
    const created = Date.UTC(2019, 5, 1, 12);
    expect((await collect(source({ path: dated, fps: 5 }))).map((f) => f.mediaTimeMs)).toEqual([0, 200, 400, 600, 800].map((pts) => created + pts));
    const given = Date.UTC(2026, 4, 1, 8);
    expect((await collect(source({ path: dated, fps: 5, mediaStartMs: given }), 2)).map((f) => f.mediaTimeMs)).toEqual([given, given + 200]);
    // The lavfi clip's muxer wrote no creation time.
    expect((await collect(source({ path: clips.oneSecond, fps: 5 }), 1))[0]!.mediaTimeMs).toBeUndefined();
  });

  it('gives every decoded frame at the native rate when fps is not set', async () => {
    const frames = await collect(source({ path: clips.oneSecond }));
    expect(frames).toHaveLength(25);
    expect(frames.map((f) => f.ptsMs)).toEqual(Array.from({ length: 25 }, (_, k) => k * 40));
  });

  it('keeps pts and seq increasing across loops', async () => {
    const src = source({ path: clips.oneSecond, fps: 5, loop: true, replayStartMs: 0 });
    const frames = await collect(src, 12);
    expect(frames.map((f) => f.seq)).toEqual(Array.from({ length: 12 }, (_, k) => k));
    expect(frames.map((f) => f.ptsMs)).toEqual(Array.from({ length: 12 }, (_, k) => k * 200));
    expect(frames.map((f) => f.captureTimeMs)).toEqual(frames.map((f) => f.ptsMs));
    expect(src.status().state).toBe('stopped'); // leaving the loop stopped it
  });

  it('samples every Nth frame: every 5th of 25 gives pts 0, 200, ... 800', async () => {
    const frames = await collect(source({ path: clips.oneSecond, sample: { everyNth: 5 } }));
    expect(frames.map((f) => f.ptsMs)).toEqual([0, 200, 400, 600, 800]);
  });

  it('samples keyframes only: one every 10 frames of a 2 s clip at 25 fps', async () => {
    const frames = await collect(source({ path: clips.keyframes, sample: { keyframes: true } }));
    expect(frames.map((f) => f.ptsMs)).toEqual([0, 400, 800, 1200, 1600]);
  });

  it('samples on scene changes: the first frame and each cut', async () => {
    const frames = await collect(source({ path: clips.scenes, sample: { sceneChange: 0.3 } }));
    expect(frames.map((f) => f.ptsMs)).toEqual([0, 1000, 2000]);
  });

  it('scales to width 160, keeping the aspect ratio', async () => {
    const frames = await collect(source({ path: clips.oneSecond, fps: 5, width: 160 }));
    expect(frames).toHaveLength(5);
    for (const frame of frames) expect([frame.width, frame.height]).toEqual([160, 120]);
  });
});

describe('createFileSource: pacing', () => {
  it('speed 1 paces to real time and never stamps a frame in the future', async () => {
    const started = Date.now();
    const src = source({ path: clips.oneSecond, fps: 10, speed: 1 });
    let futureFrames = 0;
    let count = 0;
    for await (const frame of src.frames()) {
      if (frame.captureTimeMs > Date.now()) futureFrames += 1;
      count += 1;
    }
    const elapsed = Date.now() - started;
    expect(count).toBe(10);
    expect(futureFrames).toBe(0);
    expect(elapsed).toBeGreaterThanOrEqual(880); // the last frame has pts 900 ms
  });

  it('speed N runs N times faster, and max as fast as ffmpeg decodes', async () => {
    let started = Date.now();
    expect(await collect(source({ path: clips.oneSecond, fps: 10, speed: 5 }))).toHaveLength(10);
    const atFive = Date.now() - started;
    started = Date.now();
    expect(await collect(source({ path: clips.oneSecond, fps: 10, speed: 'max' }))).toHaveLength(10);
    const atMax = Date.now() - started;
    expect(atFive).toBeGreaterThanOrEqual(170); // 900 ms / 5
    expect(atMax).toBeLessThan(700);
  });

  it('a slow consumer pauses ffmpeg instead of buffering its output', async () => {
    const src = source({ path: clips.fourSeconds, loop: true }); // would decode forever at full speed
    const iterator = src.frames()[Symbol.asyncIterator]();
    await iterator.next();
    const pid = src.status().pid;
    const statFile = `/proc/${pid}/stat`;
    if (pid === undefined || !existsSync(statFile)) {
      await src.stop();
      return; // needs Linux /proc to read the process's CPU time
    }
    /** utime + stime of the ffmpeg process, in clock ticks. */
    const cpuTicks = (): number => {
      const fields = readFileSync(statFile, 'utf8').split(') ')[1]?.split(' ') ?? [];
      return Number(fields[11]) + Number(fields[12]);
    };
    await new Promise((resolve) => setTimeout(resolve, 300)); // let the pipes fill
    const before = cpuTicks();
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(cpuTicks() - before).toBeLessThanOrEqual(3); // blocked on a full pipe, not decoding
    const next = await iterator.next();
    expect(next.value?.seq).toBe(1);
    await src.stop();
    expect((await iterator.next()).done).toBe(true);
  });
});

describe('createFileSource: stop', () => {
  it('stop() ends the frames without an error and ends ffmpeg', async () => {
    const src = source({ path: clips.oneSecond, fps: 5, loop: true, speed: 1 });
    const frames: Frame[] = [];
    let pid: number | undefined;
    for await (const frame of src.frames()) {
      frames.push(frame);
      pid = src.status().pid;
      if (frames.length === 2) void src.stop(); // the next wait (200 ms of pacing) is interrupted
    }
    expect(frames).toHaveLength(2);
    expect(src.status().state).toBe('stopped');
    expect(pid).toBeDefined();
    expect(() => process.kill(pid as number, 0)).toThrow(); // the process is gone
  });
});

describe('createFileSource: errors', () => {
  it('a missing file is SourceNotFound, before ffmpeg starts', async () => {
    const path = join(dir, 'does-not-exist.mp4');
    const src = source({ path });
    const err = await failure(src);
    expect(src.status()).toMatchObject({ state: 'failed', framesEmitted: 0, pid: undefined });
    expect(err.code).toBe(ErrorCode.SourceNotFound);
    expect(err.details).toMatchObject({ source: 'cam-test', path });
    expect(err.message).toContain(path);
  });

  it('a corrupt file is SourceDecode with the ffmpeg stderr tail', async () => {
    const err = await failure(source({ path: clips.corrupt, fps: 5 }));
    expect(err.code).toBe(ErrorCode.SourceDecode);
    expect(err.details).toMatchObject({ source: 'cam-test', path: clips.corrupt });
    expect(err.message).toMatch(/Invalid data found/);
    expect(String(err.details.stderr)).toMatch(/Invalid data found/);
  });

  it('a file with sound and no picture says so', async () => {
    const path = join(dir, 'sound.m4a');
    execFileSync(ffmpegPath, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=d=1', '-c:a', 'aac', path]);
    const err = await failure(source({ path, fps: 5 }));
    expect(err.code).toBe(ErrorCode.SourceDecode);
    expect(err.message).toContain('the file has no video stream');
  });

  it('synthetic footage from a graph ffmpeg refuses says why on its first line', async () => {
    const err = await ensureSyntheticClip('bad', { lavfi: 'nosuchfilter=foo', durationS: 1 }, dir, silentLogger()).catch((e: unknown) => e as PanoptesError);
    expect(err).toBeInstanceOf(PanoptesError);
    expect((err as PanoptesError).message.split('\n')[0]).toBe(`source bad: cannot render synthetic footage from "nosuchfilter=foo": No such filter: 'nosuchfilter'; nosuchfilter=foo: Invalid argument`);
  });

  it('a codec without a decoder is SourceUnsupportedCodec', async () => {
    const err = await failure(source({ path: clips.avs2, fps: 5 }));
    expect(err.code).toBe(ErrorCode.SourceUnsupportedCodec);
    expect(err.details).toMatchObject({ source: 'cam-test', path: clips.avs2, codec: 'avs2' });
  });

  it('ffmpeg killed mid-stream is FfmpegExited with the signal', async () => {
    const src = source({ path: clips.oneSecond, fps: 5, loop: true });
    let seen = 0;
    const err: unknown = await (async () => {
      for await (const _frame of src.frames()) {
        seen += 1;
        if (seen === 3) process.kill(src.status().pid as number, 'SIGKILL');
      }
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PanoptesError);
    const failed = err as PanoptesError;
    expect(failed.code).toBe(ErrorCode.FfmpegExited);
    expect(failed.retriable).toBe(true);
    expect(failed.details).toMatchObject({ source: 'cam-test', signal: 'SIGKILL' });
    expect(src.status().state).toBe('failed');
  });

  it('a failing source does not disturb another one', async () => {
    const [bad, good] = await Promise.allSettled([
      collect(createFileSource({ id: 'bad', path: clips.corrupt, fps: 5, speed: 'max', loop: false })),
      collect(createFileSource({ id: 'good', path: clips.fourSeconds, fps: 5, speed: 'max', loop: false })),
    ]);
    expect(bad.status).toBe('rejected');
    expect((bad as PromiseRejectedResult).reason).toMatchObject({ code: ErrorCode.SourceDecode, details: { source: 'bad' } });
    expect(good.status).toBe('fulfilled');
    const frames = (good as PromiseFulfilledResult<Frame[]>).value;
    expect(frames).toHaveLength(20);
    expect(frames.every((f) => f.source === 'good')).toBe(true);
  });

  it('a missing ffmpeg binary is FfmpegNotFound naming the path tried', async () => {
    expect(() => resolveFfmpegPath(undefined, { FFMPEG_PATH: '/nowhere/ffmpeg' })).toThrow(/\/nowhere\/ffmpeg.*FFMPEG_PATH/);
    const err = await failure(source({ path: clips.oneSecond, ffmpegPath: '/nowhere/ffmpeg' }));
    expect(err.code).toBe(ErrorCode.FfmpegNotFound);
    expect(err.details).toMatchObject({ path: '/nowhere/ffmpeg' });
  });

  it('rejects bad options with the option named', () => {
    expect(() => source({ path: clips.oneSecond, fps: 0 })).toThrow(RangeError);
    expect(() => source({ path: clips.oneSecond, speed: -1 })).toThrow(/speed/);
    expect(() => source({ path: clips.oneSecond, width: 1 })).toThrow(/width/);
  });
});

describe('createFileSource: real footage', () => {
  const name = hasFootage
    ? 'samples car-detection.mp4 (30 s, 768x432) at 2 fps: ~60 frames'
    : `SKIPPED: ${FOOTAGE} not found (shared footage absent) — would sample car-detection.mp4 at 2 fps`;
  it.skipIf(!hasFootage)(name, async () => {
    const frames = await collect(source({ path: FOOTAGE, fps: 2 }));
    expect(frames.length).toBeGreaterThanOrEqual(58);
    expect(frames.length).toBeLessThanOrEqual(62);
    for (const frame of frames) expect([frame.width, frame.height]).toEqual([768, 432]);
    expect(frames.map((f) => f.ptsMs)).toEqual(frames.map((_, k) => k * 500));
  });
});
