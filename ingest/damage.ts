import type { OutputFrame } from './showinfo.js';

/** The most samples one source owes for damage: more than a day of a 1-fps sampling. */
export const MAX_OWED_SAMPLES = 100_000;

/** A sample a damaged stretch of a recording owed: its frame_seq, and its time in the footage. */
export interface DamagedSample {
  seq: number;
  ptsMs: number;
}

/**
 * Stretches of a recording ffmpeg could not decode. Sampling with `fps`, ffmpeg's fps filter
 * repeats the last good picture over such a stretch, and the copies would be analyzed as footage
 * that does not exist; sampling every frame, the stretch is a silent jump in time. Either way each
 * sample the stretch owed takes a frame_seq and becomes a drop, and no copy is analyzed. A repeat
 * or a jump with no decoding error before it is the footage itself (a GIF's long frame, a
 * variable-rate recording, a still scene) and is kept.
 */
export class DamageTracker {
  /** Samples owed so far: the frame_seqs they took. */
  count = 0;
  #owed: DamagedSample[] = [];
  #lastPtsMs: number | undefined;
  #capped = false;

  /**
   * A source owes at most MAX_OWED_SAMPLES, so that a file whose timestamps leap by days after a
   * broken packet cannot make millions of drops; `onCapped` hears, once, that a sample went unowed.
   */
  constructor(private readonly onCapped: () => void = () => {}) {}

  /**
   * For a frame out of the graph whose frame_seq would be `seq`: how many seqs the damage before
   * it took (the frame's own included when it is a copy), and whether the frame is a copy.
   * `everyFrameMs` is the clip's frame interval when every frame is sampled, else undefined.
   */
  see(frame: OutputFrame, seq: number, everyFrameMs: number | undefined): { took: number; copy: boolean } {
    const last = this.#lastPtsMs;
    this.#lastPtsMs = frame.ptsMs;
    if (!frame.afterDamage || last === undefined) return { took: 0, copy: false };
    if (frame.copy && everyFrameMs === undefined) return { took: this.owe(seq, frame.ptsMs) ? 1 : 0, copy: true };
    const spanned = everyFrameMs === undefined ? 0 : Math.round((frame.ptsMs - last) / everyFrameMs) - 1;
    const missing = Math.min(spanned, MAX_OWED_SAMPLES - this.count);
    if (missing < spanned) this.#cap();
    for (let k = 1; k <= missing; k++) this.owe(seq + k - 1, Math.round(last + k * everyFrameMs!));
    return { took: Math.max(0, missing), copy: false };
  }

  /** A sample that took `seq` and cannot be analyzed (its JPEG has no frame header): owed a drop too, up to MAX_OWED_SAMPLES. */
  owe(seq: number, ptsMs: number): boolean {
    if (this.count >= MAX_OWED_SAMPLES) {
      this.#cap();
      return false;
    }
    this.#owed.push({ seq, ptsMs });
    this.count += 1;
    return true;
  }

  #cap(): void {
    if (!this.#capped) this.onCapped();
    this.#capped = true;
  }

  /** The samples owed since the last call: the caller records their drops. */
  take(): DamagedSample[] {
    const owed = this.#owed;
    this.#owed = [];
    return owed;
  }
}
