import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentSchema, ensureDir, ErrorCode, MIN_FPS } from '../../core/index.js';
import { createFileSource } from '../../ingest/index.js';
import { describeShortfall, expectedFrames, findShortfall } from '../../ingest/accounting.js';
import { thrown } from '../helpers.js';

describe('frames a recording owes', () => {
  it('counts duration × rate for the native rate and for fps, and every Nth from the native count', () => {
    // The shared clips, as ffmpeg decodes them: car-detection.mp4 is 30.21 s at 12.5 fps, 377 frames.
    expect(expectedFrames(30_210, 12.5, {})).toBe(378);
    expect(expectedFrames(30_210, 12.5, { fps: 2 })).toBe(60);
    expect(expectedFrames(10_000, 25, { sample: { everyNth: 5 } })).toBe(50);
    expect(expectedFrames(10_000, 25, { sample: { everyNth: 3 } })).toBe(84); // 0, 3, ... 249
  });

  it('cannot count keyframes, scene changes, or a clip without a duration (GIF) ahead', () => {
    expect(expectedFrames(10_000, 25, { sample: { keyframes: true } })).toBeUndefined();
    expect(expectedFrames(10_000, 25, { sample: { sceneChange: 0.3 } })).toBeUndefined();
    expect(expectedFrames(undefined, 12, {})).toBeUndefined();
  });

  it('finds no shortfall in the shared clips as they decode (rounding, average rates)', () => {
    const clean = [
      { durationMs: 30_210, nativeFps: 12.5, delivered: 377, sampling: {} },
      { durationMs: 30_210, nativeFps: 12.5, delivered: 60, sampling: { fps: 2 } },
      { durationMs: 39_860, nativeFps: 29.83, delivered: 1189, sampling: {} },
      { durationMs: 39_860, nativeFps: 29.83, delivered: 80, sampling: { fps: 2 } },
      { durationMs: 139_400, nativeFps: 10, delivered: 1394, sampling: {} },
      // an audio track a second longer than the video is not a truncated file
      { durationMs: 11_000, nativeFps: 25, delivered: 250, sampling: {} },
    ];
    for (const c of clean) expect(findShortfall({ ...c, endedAtMs: 0 }), JSON.stringify(c)).toBeUndefined();
  });

  it('finds the shortfall of a clip cut to 30%: the missing frames numbered on from the last one delivered', () => {
    const shortfall = findShortfall({ durationMs: 10_000, nativeFps: 25, sampling: {}, delivered: 76, endedAtMs: 3_000 });
    expect(shortfall).toEqual({ expected: 250, delivered: 76, missing: 174, durationMs: 10_000, endedAtMs: 3_000 });
    expect(describeShortfall(shortfall!)).toBe(
      'the recording ends early: footage stops at 3.0 s of its 10.0 s; 76 of 250 frames delivered, 174 missing (frame_seq 76..249)',
    );
    // At a sampled rate the owed frames are sampled frames.
    expect(findShortfall({ durationMs: 10_000, nativeFps: 25, sampling: { fps: 2 }, delivered: 6, endedAtMs: 2_500 })?.missing).toBe(14);
    // Nothing delivered at all is a shortfall too.
    expect(findShortfall({ durationMs: 10_000, nativeFps: 25, sampling: { fps: 1 }, delivered: 0, endedAtMs: undefined })?.missing).toBe(10);
  });
});

describe('fps below the minimum', () => {
  it('is refused by the config schema, naming the key and the value', () => {
    const parsed = deploymentSchema.safeParse({ apps: ['a.yaml'], sources: [{ id: 'cam', path: 'x.mp4', apps: ['a'], fps: 0.001 }] }, { reportInput: true });
    expect(parsed.success).toBe(false);
    const issue = parsed.error!.issues[0]!;
    expect(issue.path).toEqual(['sources', 0, 'fps']);
    expect(issue.message).toContain(`at least ${MIN_FPS}`);
    expect('input' in issue && issue.input).toBe(0.001);
    expect(deploymentSchema.safeParse({ apps: ['a.yaml'], sources: [{ id: 'cam', path: 'x.mp4', apps: ['a'], fps: MIN_FPS }] }).success).toBe(true);
  });

  it('is refused by the file source itself', () => {
    expect(() => createFileSource({ id: 'cam', path: 'x.mp4', speed: 'max', loop: false, fps: 0.001 })).toThrow(/fps: expected a number of at least 0\.01, got 0\.001/);
  });
});

describe('ensureDir (dataDir)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-data-dir-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('creates missing levels and returns the absolute path', () => {
    expect(ensureDir(join(dir, 'a/b/c'), 'dataDir')).toBe(join(dir, 'a/b/c'));
    expect(ensureDir(join(dir, 'a/b/c'), 'dataDir')).toBe(join(dir, 'a/b/c')); // there already: fine
  });

  it('under a regular file: ConfigInvalid naming the key, the path and the file in the way', () => {
    writeFileSync(join(dir, 'file'), 'x');
    const err = thrown(() => ensureDir(join(dir, 'file/data'), 'dataDir'));
    expect(err.code).toBe(ErrorCode.ConfigInvalid);
    expect(err.message).toBe(`dataDir ${join(dir, 'file/data')}: cannot create a directory here: ${join(dir, 'file')} is a file, not a directory`);
    expect(err.details).toEqual({ key: 'dataDir', path: join(dir, 'file/data') });
  });

  it('under /proc: fails at once (Node\'s recursive mkdir never returns there)', () => {
    const started = Date.now();
    const err = thrown(() => ensureDir('/proc/panoptes-test/data', 'dataDir'));
    expect(err.message).toMatch(/^dataDir \/proc\/panoptes-test\/data: cannot create \/proc\/panoptes-test: ENOENT/);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
