/**
 * One partition's records, in offset order. Offsets only grow; the front of the log is trimmed
 * when every group has committed past it (release) or, on a topic without groups, when the topic
 * is over its retention bound (drop). Reads never see a trimmed record.
 */
import type { BusMessage } from '../types.js';

export interface StoredRecord {
  readonly message: BusMessage;
  /** What the record costs the bus's memory budget (see `recordBytes`). */
  readonly bytes: number;
  /** Topic-wide append order, to find the oldest record across partitions. */
  readonly seq: number;
}

export class PartitionLog {
  private records: StoredRecord[] = [];
  /** Index in `records` of the first retained record; the front is trimmed lazily. */
  private head = 0;
  /** Offset of the first retained record (= `endOffset` when the log is empty). */
  private start = 0;
  private retainedBytes = 0;

  constructor(readonly partition: number) {}

  get startOffset(): number {
    return this.start;
  }

  /** Offset the next appended record will get. */
  get endOffset(): number {
    return this.start + this.records.length - this.head;
  }

  get bytes(): number {
    return this.retainedBytes;
  }

  get oldest(): StoredRecord | undefined {
    return this.records[this.head];
  }

  append(record: Omit<StoredRecord, 'message'> & { message: Omit<BusMessage, 'offset'> }): number {
    const offset = this.endOffset;
    this.records.push({ ...record, message: { ...record.message, offset } });
    this.retainedBytes += record.bytes;
    return offset;
  }

  /** Up to `max` records from `offset` on (from the start when `offset` was already trimmed). */
  read(offset: number, max: number): BusMessage[] {
    const from = this.head + Math.max(offset, this.start) - this.start;
    return this.records.slice(from, from + max).map((record) => record.message);
  }

  /** Trims every record below `offset`; returns the bytes freed. */
  trimBefore(offset: number): number {
    let freed = 0;
    while (this.start < offset && this.head < this.records.length) {
      freed += this.dropOldest();
    }
    return freed;
  }

  /** Trims the first record; returns the bytes freed. */
  dropOldest(): number {
    const record = this.records[this.head];
    if (!record) return 0;
    this.head += 1;
    this.start += 1;
    this.retainedBytes -= record.bytes;
    // Compact now and then instead of shifting the array on every trim.
    if (this.head >= 1024 && this.head * 2 >= this.records.length) {
      this.records = this.records.slice(this.head);
      this.head = 0;
    }
    return record.bytes;
  }
}

/** Memory a record holds: its value, key and headers in UTF-8 bytes. */
export function recordBytes(key: string, value: Uint8Array, headers: Record<string, string>): number {
  let bytes = value.byteLength + Buffer.byteLength(key, 'utf8');
  for (const [name, text] of Object.entries(headers)) {
    bytes += Buffer.byteLength(name, 'utf8') + Buffer.byteLength(text, 'utf8');
  }
  return bytes;
}
