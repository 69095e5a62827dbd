/**
 * What ingest owes as drops, sent on the drops topic: the frames a source took a frame_seq for,
 * or never read, and will not deliver.
 */
import { Channels, type Drop, type Producer } from '../core/index.js';
import { describeShortfall, type Shortfall } from './accounting.js';
import { MAX_OWED_SAMPLES, type DamagedSample } from './damage.js';

/** Drop records per send: a long recording cut short owes thousands. */
const DROPS_PER_SEND = 500;

/**
 * One drop per frame a recording owed but never delivered, numbered on from the last frame
 * sent, so that for such a source `frames` rows and `drops` rows together hold every frame_seq
 * from 0 to the expected count (docs/ingest.md), up to MAX_OWED_SAMPLES drops. The detail names the file's shortfall only
 * (no clock): replayed, the same file gives the same drop rows, not new ones.
 */
export function publishShortfall(producer: Producer, source: string, shortfall: Shortfall): Promise<void> {
  const detail = describeShortfall(shortfall);
  // A container may claim any duration: past MAX_OWED_SAMPLES the detail, naming the whole range, stands for the rest.
  const seqs = Array.from({ length: Math.min(shortfall.expected - shortfall.delivered, MAX_OWED_SAMPLES) }, (_, i) => shortfall.delivered + i);
  return sendFrameDrops(producer, source, 'truncated', seqs.map((seq) => ({ seq, detail })));
}

/** One drop per sample of footage that cannot be analyzed, at the frame_seq it took; the detail depends on the file only, as a shortfall's does. */
export function publishDamaged(producer: Producer, source: string, owed: readonly DamagedSample[]): Promise<void> {
  return sendFrameDrops(producer, source, 'damaged', owed.map(({ seq, ptsMs }) => ({ seq, detail: `ffmpeg could not decode the footage at ${(ptsMs / 1000).toFixed(1)} s` })));
}

/**
 * One drop for segments of a live stream lost before they were read (gone from the playlist
 * before they were fetched, or failed to download). Without a frame_seq: how many frames they
 * held is not known, and the frame read when the loss was seen (`nearSeq`) may come from before
 * it (the follower reads ahead of ffmpeg), so it is named in the detail only.
 */
export function publishMissedSegments(producer: Producer, source: string, segments: number, nearSeq: number | undefined): Promise<void> {
  const where = nearSeq === undefined ? 'before the stream ended' : `around frame ${nearSeq}`;
  const drop: Drop = {
    what: 'frame',
    where: 'ingest',
    why: 'segments-missed',
    source,
    atMs: Date.now(),
    detail: `${segments} segment${segments === 1 ? '' : 's'} of the live stream lost ${where}: gone from the playlist before they were fetched, or failed to download; their frames were never read`,
  };
  return producer.send(Channels.drops.topic, [Channels.drops.record(drop)]).then(() => undefined);
}

async function sendFrameDrops(producer: Producer, source: string, why: string, drops: readonly { seq: number; detail: string }[]): Promise<void> {
  const atMs = Date.now();
  for (let from = 0; from < drops.length; from += DROPS_PER_SEND) {
    const records = drops.slice(from, from + DROPS_PER_SEND).map(({ seq, detail }) => {
      const drop: Drop = { what: 'frame', where: 'ingest', why, source, frameSeq: seq, atMs, detail };
      return Channels.drops.record(drop);
    });
    await producer.send(Channels.drops.topic, records);
  }
}
