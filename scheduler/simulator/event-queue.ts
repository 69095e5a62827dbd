/**
 * The simulator's clock: events in time order, and in the order they were scheduled among
 * events at the same time, so a run never depends on how the heap happens to break ties.
 */
export class EventQueue<E> {
  readonly #heap: Entry<E>[] = [];
  #seq = 0;

  push(timeMs: number, event: E): void {
    const heap = this.#heap;
    const entry = { timeMs, seq: this.#seq++, event };
    let i = heap.length;
    heap.push(entry);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = heap[parent] as Entry<E>;
      if (!before(entry, above)) break;
      heap[i] = above;
      i = parent;
    }
    heap[i] = entry;
  }

  /** The earliest event and its time; undefined when none is left. */
  pop(): { timeMs: number; event: E } | undefined {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (!top || !last || heap.length === 0) return top;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= heap.length) break;
      const right = heap[child + 1];
      if (right && before(right, heap[child] as Entry<E>)) child++;
      const below = heap[child] as Entry<E>;
      if (!before(below, last)) break;
      heap[i] = below;
      i = child;
    }
    heap[i] = last;
    return top;
  }
}

interface Entry<E> {
  timeMs: number;
  seq: number;
  event: E;
}

const before = <E>(a: Entry<E>, b: Entry<E>): boolean => a.timeMs < b.timeMs || (a.timeMs === b.timeMs && a.seq < b.seq);
