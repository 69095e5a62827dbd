import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createProgress, statusLines } from '../../cli/progress.js';
import { gifDurationMs, resolveFfmpegPath } from '../../ingest/index.js';

describe('replay progress', () => {
  it('says the stage, frames done of the total, the rate from the first frame on, and the time left', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    try {
      let written = '';
      const stream = { isTTY: false, write: (text: string) => ((written += text), true) } as unknown as NodeJS.WriteStream;
      const progress = createProgress(stream);
      progress.update({ stage: 'rendering footage', frames: 0, total: 410, sources: 6 });
      vi.advanceTimersByTime(3000);
      // The first state and each new stage are said at once; the rate counts from the first frame, and needs a second of them.
      progress.update({ stage: 'replaying', frames: 1, total: 410, sources: 6 });
      vi.advanceTimersByTime(10_000);
      progress.update({ stage: 'replaying', frames: 101, total: 410, sources: 6 });
      progress.update({ stage: 'flushing results', frames: 410, total: 410, sources: 1 });
      progress.stop();
      expect(written.split('\n').filter(Boolean)).toEqual([
        'rendering footage: 0/410 frames from 6 sources, 0.0 fps, ETA ?',
        'replaying: 1/410 frames from 6 sources, 0.0 fps, ETA ?',
        'replaying: 101/410 frames from 6 sources, 10.1 fps, ETA 31 s',
        'flushing results: 410/410 frames from 1 source, 41.0 fps, ETA 0 s',
      ]);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("a GIF's length, which ffmpeg does not report", () => {
  const dir = mkdtempSync(join(tmpdir(), 'panoptes-gif-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('adds up its frames as ffmpeg shows them; not a GIF, or one cut short: unknown', async () => {
    const gif = join(dir, 'clip.gif');
    // 25 frames at 10 fps: 2.5 s.
    execFileSync(resolveFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=64x48:rate=10', '-t', '2.5', gif]);
    expect(await gifDurationMs(gif)).toBe(2500);
    const cut = join(dir, 'cut.gif');
    const bytes = readFileSync(gif);
    writeFileSync(cut, bytes.subarray(0, Math.floor(bytes.length / 2)));
    expect(await gifDurationMs(cut)).toBeUndefined();
    const other = join(dir, 'other.gif');
    writeFileSync(other, 'not a gif at all');
    expect(await gifDurationMs(other)).toBeUndefined();
  });
});

describe('the status line of roles without ingest', () => {
  it('says what each role did since the last line, and when they all waited', () => {
    const counts = { frames: 10, drops: 0, rowsInserted: 40 };
    const status = statusLines({ backend: () => counts, sink: () => counts, scheduler: () => ({ epoch: 2, backends: ['a', 'b'] }) });
    expect(status.line()).toBe('backend: 10 frames (+10), 0 drops (+0); sink: 40 rows (+40); scheduler: epoch 2, 2 backends');
    expect(status.line()).toBe('backend: 10 frames (+0), 0 drops (+0); sink: 40 rows (+0); scheduler: epoch 2, 2 backends — idle for 10 s, waiting for work');
    Object.assign(counts, { frames: 15, drops: 1 });
    expect(statusLines({ sink: () => counts }).line()).toBe('sink: 40 rows (+40)');
  });
});
