/**
 * Key → partition, exactly as Kafka's default partitioner (and kafkajs's DefaultPartitioner) does
 * it for keyed records: `toPositive(murmur2(utf8(key))) % partitions`. Using the same function
 * means a source id lands on the same partition number on the memory bus and on Kafka, so a plan
 * that routes partitions means the same thing on both.
 */
export function partitionForKey(key: string, partitions: number): number {
  return toPositive(murmur2(Buffer.from(key, 'utf8'))) % partitions;
}

/** Kafka's `Utils.toPositive`: clears the sign bit (not Math.abs, which overflows on MIN_VALUE). */
function toPositive(n: number): number {
  return n & 0x7fffffff;
}

/** Kafka's `Utils.murmur2` (MurmurHash2, 32-bit, seed 0x9747b28c), as a signed 32-bit int. */
export function murmur2(data: Uint8Array): number {
  const m = 0x5bd1e995;
  const length = data.length;
  let h = 0x9747b28c ^ length;
  const byteAt = (i: number): number => data[i] ?? 0;

  const wholeWords = length - (length % 4);
  for (let i = 0; i < wholeWords; i += 4) {
    let k = byteAt(i) | (byteAt(i + 1) << 8) | (byteAt(i + 2) << 16) | (byteAt(i + 3) << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }

  // The last 1–3 bytes (Kafka's switch falls through from case 3 to case 1).
  const rest = length % 4;
  if (rest >= 3) h ^= byteAt(wholeWords + 2) << 16;
  if (rest >= 2) h ^= byteAt(wholeWords + 1) << 8;
  if (rest >= 1) h = Math.imul(h ^ byteAt(wholeWords), m);

  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}
