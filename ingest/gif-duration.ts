import { open } from 'node:fs/promises';

/** ffmpeg's GIF demuxer shows a frame whose delay is under 2/100 s for 10/100 s (`min_delay`, `default_delay`). */
const MIN_DELAY = 2;
const DEFAULT_DELAY = 10;
/** GIFs larger than this are not read for their length (it stays unknown). */
const MAX_BYTES = 256 * 1024 * 1024;

/**
 * How long an animated GIF plays, in ms, from the delays in its frames' graphic control
 * extensions, counted as ffmpeg shows them; undefined when the file is not a GIF or is cut short.
 * ffmpeg reports no duration for a GIF, and a replay needs one to know its length ahead.
 * Walks the file's blocks (their headers only; no pixel is decoded).
 */
export async function gifDurationMs(path: string): Promise<number | undefined> {
  const file = await open(path, 'r');
  let bytes: Buffer;
  try {
    const { size } = await file.stat();
    if (size > MAX_BYTES) return undefined;
    bytes = Buffer.alloc(size);
    await file.read(bytes, 0, size, 0);
  } finally {
    await file.close();
  }
  if (bytes.toString('latin1', 0, 6) !== 'GIF89a' && bytes.toString('latin1', 0, 6) !== 'GIF87a') return undefined;
  const colourTable = (packed: number): number => ((packed & 0x80) !== 0 ? 3 * 2 ** ((packed & 0x07) + 1) : 0);
  /** The offset just past a chain of data sub-blocks starting at `at`. */
  const skipSubBlocks = (at: number): number => {
    while (at < bytes.length && bytes[at] !== 0) at += bytes[at]! + 1;
    return at + 1;
  };
  let at = 13 + colourTable(bytes[10] ?? 0);
  let centiseconds = 0;
  let delay = DEFAULT_DELAY;
  while (at < bytes.length) {
    const block = bytes[at];
    if (block === 0x3b) return centiseconds * 10;
    if (block === 0x21) {
      // Graphic control extension: its delay applies to the next image.
      if (bytes[at + 1] === 0xf9 && at + 6 < bytes.length) delay = bytes.readUInt16LE(at + 4);
      at = skipSubBlocks(at + 2);
    } else if (block === 0x2c) {
      centiseconds += delay < MIN_DELAY ? DEFAULT_DELAY : delay;
      delay = DEFAULT_DELAY;
      at = skipSubBlocks(at + 10 + colourTable(bytes[at + 9] ?? 0) + 1);
    } else {
      return undefined;
    }
  }
  // No trailer: a file cut short plays what it has, but its length is not known ahead.
  return undefined;
}
