/**
 * Model input buffers used again. A runtime that moves a batch's feeds to a worker thread gets
 * them back after the run, and the next batch of that size is written into one of them instead
 * of fresh memory: a 512×512 float frame is 3 MB, and fresh every frame it costs page faults,
 * allocation and garbage collection on both threads. Only sizes asked for are kept, a few of
 * each; small buffers are not worth it (and Node's own pool of small buffers is never taken in).
 */
const KEEP_PER_SIZE = 4;
const MIN_BYTES = 64 * 1024;
const free = new Map<number, ArrayBuffer[]>();

/** Memory of its own for a tensor of `bytes` (not zero-filled: its writer fills every element). */
export function takeTensorBuffer(bytes: number): ArrayBuffer {
  if (bytes < MIN_BYTES) return Buffer.allocUnsafeSlow(bytes).buffer as ArrayBuffer;
  let kept = free.get(bytes);
  if (!kept) free.set(bytes, (kept = []));
  return kept.pop() ?? (Buffer.allocUnsafeSlow(bytes).buffer as ArrayBuffer);
}

/** A tensor's buffer its owner is done with (a run's feeds, back from the worker): kept where its size is asked for. */
export function giveBackTensorBuffer(buffer: ArrayBuffer): void {
  const kept = free.get(buffer.byteLength);
  if (kept && kept.length < KEEP_PER_SIZE && buffer.byteLength >= MIN_BYTES) kept.push(buffer);
}
