/** Frame timestamps from ffmpeg's showinfo filter, read off its stderr. */

const SHOWINFO = /^\[Parsed_showinfo_(\d+) @ [^\]]+\] /;
const SHOWINFO_TIME_BASE = /config in time_base: (\d+)\/(\d+)/;
const SHOWINFO_FRAME = /\bn:\s*\d+\s+pts:\s*(\S+)/;

/** ffmpeg's words for a picture it could not decode (a damaged file). */
const DECODE_ERROR = /error while decoding|concealing \d+|Invalid NAL unit size|missing picture in access unit|co located POCs unavailable|corrupt decoded frame|Invalid data found when processing input/i;

/**
 * A decoder working on several frames at once reports a broken packet before it has put out the
 * frames that came before it: an error this many decoded frames back still counts as just before.
 */
const DAMAGE_REACH = 16;

/** A frame leaving the filter graph. */
export interface OutputFrame {
  ptsMs: number;
  /** No frame was decoded since the one before it left: the fps filter repeated a picture over a gap. */
  copy: boolean;
  /** ffmpeg reported a picture it could not decode within the last few decoded frames: a gap here is damage, not a still scene. */
  afterDamage: boolean;
}

/**
 * The pts of each frame leaving the filter graph, in order, from the last showinfo's stderr
 * lines (the filter at `outputIndex`); frame lines of the first one count decoded frames.
 * ffmpeg writes a frame's line before the frame's JPEG, so `next()` waits at most for the
 * stderr pipe to catch up with stdout. The filters run one frame at a time, so a decoded
 * frame's line comes before the lines of the frames the graph makes from it.
 */
export class ShowinfoTimestamps {
  #timeBase: { num: number; den: number } = { num: 1, den: 1000 };
  #queue: OutputFrame[] = [];
  #lastPtsMs = 0;
  #closed = false;
  #wake: (() => void) | undefined;
  #decodedSinceOutput = 0;
  #outputs = 0;
  /** Frames decoded since ffmpeg last reported a picture it could not decode. */
  #decodedSinceError = Infinity;

  constructor(
    private readonly outputIndex: number,
    private readonly onDecoded: () => void,
  ) {}

  /** Returns true for showinfo lines (they are data, not messages). */
  onLine(line: string): boolean {
    const showinfo = SHOWINFO.exec(line);
    if (!showinfo) {
      // ffmpeg's messages start at the margin; what it prints about the input (metadata a file
      // can fill with any words) is indented, and must not pass for a decoding error.
      if (!/^\s/.test(line) && DECODE_ERROR.test(line)) this.#decodedSinceError = 0;
      return false;
    }
    if (Number(showinfo[1]) !== this.outputIndex) {
      if (SHOWINFO_FRAME.test(line)) {
        this.#decodedSinceOutput += 1;
        this.#decodedSinceError += 1;
        this.onDecoded();
      }
      return true;
    }
    const timeBase = SHOWINFO_TIME_BASE.exec(line);
    if (timeBase) {
      this.#timeBase = { num: Number(timeBase[1]), den: Number(timeBase[2]) };
      return true;
    }
    const frame = SHOWINFO_FRAME.exec(line);
    if (frame) {
      const pts = Number(frame[1]);
      // A frame without pts (NOPTS) keeps the previous time.
      const ptsMs = Number.isFinite(pts) ? Math.round((pts * this.#timeBase.num * 1000) / this.#timeBase.den) : this.#lastPtsMs;
      this.#lastPtsMs = ptsMs;
      this.#queue.push({ ptsMs, copy: this.#outputs > 0 && this.#decodedSinceOutput === 0, afterDamage: this.#decodedSinceError <= DAMAGE_REACH });
      this.#outputs += 1;
      this.#decodedSinceOutput = 0;
      this.#notify();
    }
    return true;
  }

  /** No more lines will come (ffmpeg exited and its stderr was read). */
  close(): void {
    this.#closed = true;
    this.#notify();
  }

  /** The next frame out of the graph, or undefined when ffmpeg ended without one. */
  async next(): Promise<OutputFrame | undefined> {
    while (this.#queue.length === 0 && !this.#closed) {
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
    return this.#queue.shift();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
