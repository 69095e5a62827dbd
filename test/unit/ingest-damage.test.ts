import { describe, expect, it } from 'vitest';
import { DamageTracker, MAX_OWED_SAMPLES } from '../../ingest/damage.js';
import { ShowinfoTimestamps, type OutputFrame } from '../../ingest/showinfo.js';

/** ffmpeg's stderr as the file source reads it: showinfo 0 counts decoded frames, showinfo 2 times the frames that leave. */
const decoded = (ms: number): string => `[Parsed_showinfo_0 @ 0x1] n: 0 pts: ${ms} pts_time:${ms / 1000}`;
const out = (ms: number): string => `[Parsed_showinfo_2 @ 0x2] n: 0 pts: ${ms} pts_time:${ms / 1000}`;
const BROKEN = '[h264 @ 0x3] error while decoding MB 10 4, bytestream -7';

async function framesOf(lines: string[]): Promise<OutputFrame[]> {
  const timestamps = new ShowinfoTimestamps(2, () => {});
  timestamps.onLine('[Parsed_showinfo_2 @ 0x2] config in time_base: 1/1000, frame_rate: 2/1');
  for (const line of lines) timestamps.onLine(line);
  timestamps.close();
  const frames: OutputFrame[] = [];
  for (let f = await timestamps.next(); f; f = await timestamps.next()) frames.push(f);
  return frames;
}

/** Each frame through the tracker at the sampling given; the seqs analyzed and those owed as drops. */
function track(frames: OutputFrame[], everyFrameMs?: number): { analyzed: number[]; owed: number[] } {
  const damage = new DamageTracker();
  const analyzed: number[] = [];
  for (const frame of frames) {
    const { copy } = damage.see(frame, analyzed.length + damage.count, everyFrameMs);
    if (!copy) analyzed.push(analyzed.length + damage.count);
  }
  return { analyzed, owed: damage.take().map((d) => d.seq) };
}

describe('damaged footage', () => {
  it('sampled with fps: copies over a stretch ffmpeg could not decode are owed as drops; copies over a still scene are kept', async () => {
    // The fps filter (2 fps) puts out its current picture for every tick before the next picture it
    // receives: a picture at 0 s and the next at 2 s give the first for 0, 0.5, 1 and 1.5 s.
    const still = await framesOf([decoded(0), decoded(2000), out(0), out(500), out(1000), out(1500), decoded(2100), out(2000)]);
    expect(still.map((f) => f.copy)).toEqual([false, true, true, true, false]);
    expect(track(still)).toEqual({ analyzed: [0, 1, 2, 3, 4], owed: [] });

    const broken = await framesOf([decoded(0), BROKEN, BROKEN, decoded(2000), out(0), out(500), out(1000), out(1500), decoded(2100), out(2000)]);
    expect(broken.every((f) => f.afterDamage)).toBe(true);
    expect(track(broken)).toEqual({ analyzed: [0, 4], owed: [1, 2, 3] });
  });

  it('every frame sampled: a jump right after a decoding error owes the frames it skipped; an error long before does not', async () => {
    const frames = (lines: string[]) => framesOf(lines.flatMap((l) => (l === BROKEN ? [l] : [decoded(Number(l)), out(Number(l))])));
    expect(track(await frames(['0', '100', BROKEN, '500', '600']), 100)).toEqual({ analyzed: [0, 1, 5, 6], owed: [2, 3, 4] });
    const long = ['0', BROKEN, ...Array.from({ length: 20 }, (_, i) => String(100 * (i + 1))), '2600'];
    expect(track(await frames(long), 100)).toEqual({ analyzed: Array.from({ length: 22 }, (_, i) => i), owed: [] });
  });

  it('owes at most 100,000 samples a source, saying so once: timestamps that leap by days after a broken packet make no millions of drops', async () => {
    const frames = await framesOf([decoded(0), out(0), BROKEN, decoded(86_400_000), out(86_400_000), BROKEN, decoded(172_800_000), out(172_800_000)]);
    let said = 0;
    const damage = new DamageTracker(() => (said += 1));
    const took = frames.map((frame, i) => damage.see(frame, i + damage.count, 500).took);
    // A day at 2 fps is 172,799 samples: the first gap is owed up to the cap, the second not at all.
    expect(took).toEqual([0, MAX_OWED_SAMPLES, 0]);
    expect(damage.count).toBe(MAX_OWED_SAMPLES);
    expect(damage.take()).toHaveLength(MAX_OWED_SAMPLES);
    expect(said).toBe(1);
  });

  it('takes only ffmpeg\'s own messages for decoding errors: indented lines about the input (metadata) are not', async () => {
    const titled = await framesOf([decoded(0), out(0), '    title           : error while decoding MB 1 1', decoded(5000), out(5000)]);
    expect(titled.map((f) => f.afterDamage)).toEqual([false, false]);
  });
});
