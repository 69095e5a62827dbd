/**
 * Splits a concatenated MJPEG byte stream (ffmpeg `-f image2pipe -c:v mjpeg`) into whole JPEG
 * images, chunk by chunk, with every marker allowed to straddle a chunk boundary.
 *
 * The parser walks the JPEG structure instead of searching for `ff d9`:
 * - before a scan (SOS) every segment is `ff <marker> <len16> <len-2 bytes>`, and those bytes are
 *   skipped by length, so an `ff d9` inside an APP segment (an EXIF thumbnail) can't end the image;
 * - inside entropy-coded data an `ff` data byte is always stuffed as `ff 00`, and `ff d0..d7`
 *   are restart markers, so the first other `ff xx` is a real marker: EOI ends the image, anything
 *   else (DHT, SOS of the next progressive scan, ...) is parsed as a segment again.
 *
 * Chunks are kept by reference and copied once, when an image is complete: linear in the input.
 * Bytes outside an image (garbage before SOI, a broken image) are skipped and counted.
 */

const MARKER_PREFIX = 0xff;
const SOI = 0xd8;
const EOI = 0xd9;
const SOS = 0xda;
const TEM = 0x01;
const RST0 = 0xd0;
const RST7 = 0xd7;

/** Markers without a length field. */
function isStandalone(marker: number): boolean {
  return marker === TEM || (marker >= RST0 && marker <= RST7);
}

/** Where the parser is. `seekSoi` is between images; every other state is inside one. */
type State = 'seekSoi' | 'marker' | 'length' | 'skip' | 'entropy';

export interface JpegSplitterOptions {
  /**
   * An image that grows past this is dropped (a stream with no EOI would otherwise be buffered
   * without bound): it comes out as an empty buffer, in its place among the images, so the
   * caller can count it (a frame ffmpeg wrote, with its own timestamp).
   * @defaultValue 64 MiB
   */
  maxImageBytes?: number;
}

export class JpegSplitter {
  readonly #maxImageBytes: number;
  #state: State = 'seekSoi';
  /** The previous byte was 0xff (in `seekSoi`, `marker` and `entropy`). */
  #sawPrefix = false;
  /** The segment whose length is being read or skipped. */
  #marker = 0;
  #lengthBytesRead = 0;
  #length = 0;
  #skipRemaining = 0;
  /** The current image's bytes from earlier chunks. */
  #parts: Buffer[] = [];
  #partsBytes = 0;
  #skippedBytes = 0;

  constructor(options: JpegSplitterOptions = {}) {
    this.#maxImageBytes = options.maxImageBytes ?? 64 * 1024 * 1024;
  }

  /** Bytes that were not part of any complete image so far (garbage, broken images). */
  get skippedBytes(): number {
    return this.#skippedBytes;
  }

  /** Bytes of an unfinished image held right now. */
  get pendingBytes(): number {
    return this.#partsBytes;
  }

  /** Feeds one chunk; returns the images it completed, in order. */
  push(chunk: Buffer): Buffer[] {
    const images: Buffer[] = [];
    /** Where the current image starts in this chunk (0 when it began in an earlier chunk). */
    let imageStart = 0;
    let i = 0;

    const startImage = (prefixInThisChunk: boolean): void => {
      this.#parts = [];
      this.#partsBytes = 0;
      if (prefixInThisChunk) {
        imageStart = i - 1;
      } else {
        // The 0xff of the SOI marker ended the previous chunk.
        this.#parts.push(Buffer.from([MARKER_PREFIX]));
        this.#partsBytes = 1;
        imageStart = i;
      }
      this.#state = 'marker';
    };

    const dropImage = (): void => {
      this.#skippedBytes += this.#partsBytes + (i - imageStart);
      this.#parts = [];
      this.#partsBytes = 0;
      this.#state = 'seekSoi';
    };

    /** Handles the marker byte at `i` (its 0xff prefix came just before). */
    const onMarker = (marker: number): void => {
      if (marker === EOI) {
        this.#parts.push(chunk.subarray(imageStart, i + 1));
        images.push(concatUnpooled(this.#parts));
        this.#parts = [];
        this.#partsBytes = 0;
        this.#state = 'seekSoi';
      } else if (marker === SOI) {
        // A new image before the old one ended: the old one is broken; keep only this SOI.
        this.#skippedBytes += this.#partsBytes + (i - imageStart) - 1;
        startImage(i > 0);
      } else if (!isStandalone(marker)) {
        this.#marker = marker;
        this.#lengthBytesRead = 0;
        this.#length = 0;
        this.#state = 'length';
      }
    };

    while (i < chunk.length) {
      switch (this.#state) {
        case 'seekSoi': {
          const byte = chunk[i] as number;
          if (this.#sawPrefix && byte === SOI) {
            this.#sawPrefix = false;
            this.#skippedBytes -= 1; // the 0xff before SOI was counted as skipped
            startImage(i > 0);
          } else {
            this.#sawPrefix = byte === MARKER_PREFIX;
            this.#skippedBytes += 1;
          }
          i += 1;
          break;
        }

        case 'marker': {
          const byte = chunk[i] as number;
          if (!this.#sawPrefix) {
            if (byte === MARKER_PREFIX) {
              this.#sawPrefix = true;
              i += 1;
            } else {
              dropImage(); // segments must follow each other directly
            }
            break;
          }
          if (byte === MARKER_PREFIX) {
            i += 1; // fill byte
          } else if (byte === 0x00) {
            this.#sawPrefix = false;
            dropImage();
          } else {
            this.#sawPrefix = false;
            onMarker(byte);
            i += 1;
          }
          break;
        }

        case 'length': {
          this.#length = (this.#length << 8) | (chunk[i] as number);
          this.#lengthBytesRead += 1;
          i += 1;
          if (this.#lengthBytesRead === 2) {
            if (this.#length < 2) {
              dropImage();
            } else {
              this.#skipRemaining = this.#length - 2;
              this.#state = 'skip';
            }
          }
          break;
        }

        case 'skip': {
          const step = Math.min(this.#skipRemaining, chunk.length - i);
          i += step;
          this.#skipRemaining -= step;
          if (this.#skipRemaining === 0) this.#state = this.#marker === SOS ? 'entropy' : 'marker';
          break;
        }

        case 'entropy': {
          if (!this.#sawPrefix) {
            const next = chunk.indexOf(MARKER_PREFIX, i);
            if (next < 0) {
              i = chunk.length;
            } else {
              this.#sawPrefix = true;
              i = next + 1;
            }
            break;
          }
          const byte = chunk[i] as number;
          if (byte === MARKER_PREFIX) {
            i += 1; // fill byte, still a prefix
            break;
          }
          this.#sawPrefix = false;
          // ff 00 is a stuffed data byte; RSTn and TEM don't end the scan.
          if (byte !== 0x00 && !isStandalone(byte)) {
            this.#state = 'marker';
            onMarker(byte);
          }
          i += 1;
          break;
        }
      }
    }

    if (this.#state !== 'seekSoi') {
      const rest = chunk.subarray(imageStart);
      this.#parts.push(rest);
      this.#partsBytes += rest.length;
      if (this.#partsBytes > this.#maxImageBytes) {
        images.push(Buffer.alloc(0));
        this.#skippedBytes += this.#partsBytes;
        this.#parts = [];
        this.#partsBytes = 0;
        this.#state = 'seekSoi';
        this.#sawPrefix = false;
      }
    }
    return images;
  }
}

/**
 * One copy of the parts into memory of its own. `Buffer.concat` may place small results in
 * Node's shared pool, and a frame's `jpeg.buffer` must not be shared (it may be transferred).
 */
function concatUnpooled(parts: Buffer[]): Buffer {
  const size = parts.reduce((sum, part) => sum + part.length, 0);
  const image = Buffer.allocUnsafeSlow(size);
  let offset = 0;
  for (const part of parts) offset += part.copy(image, offset);
  return image;
}

export interface JpegSize {
  width: number;
  height: number;
}

/**
 * Reads width and height from a JPEG's frame header (SOF0..SOF15: baseline, progressive, ...).
 * Returns undefined when the bytes have no frame header before the first scan.
 */
export function readJpegSize(jpeg: Uint8Array): JpegSize | undefined {
  if (jpeg[0] !== MARKER_PREFIX || jpeg[1] !== SOI) return undefined;
  let i = 2;
  while (i + 3 < jpeg.length) {
    if (jpeg[i] !== MARKER_PREFIX) return undefined;
    const marker = jpeg[i + 1] as number;
    if (marker === MARKER_PREFIX) {
      i += 1; // fill byte
      continue;
    }
    if (isStandalone(marker)) {
      i += 2;
      continue;
    }
    if (marker === SOS || marker === EOI) return undefined;
    const length = ((jpeg[i + 2] as number) << 8) | (jpeg[i + 3] as number);
    // SOFn is 0xc0..0xcf except DHT (c4), JPG (c8) and DAC (cc).
    const isFrameHeader = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrameHeader) {
      // length(2) precision(1) height(2) width(2)
      if (i + 8 >= jpeg.length) return undefined;
      const height = ((jpeg[i + 5] as number) << 8) | (jpeg[i + 6] as number);
      const width = ((jpeg[i + 7] as number) << 8) | (jpeg[i + 8] as number);
      return { width, height };
    }
    i += 2 + length;
  }
  return undefined;
}
