/** A (node, session) queue ordered by due time; `head` marks what has been taken. */
export class RequestQueue<Item extends { dueMs: number }> {
  items: Item[] = [];
  head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  /** Inserts by due time; requests mostly arrive in due order, so this is an append. */
  push(request: Item): void {
    const items = this.items;
    let i = items.length;
    items.push(request);
    while (i > this.head && (items[i - 1] as Item).dueMs > request.dueMs) {
      items[i] = items[i - 1] as Item;
      i--;
    }
    items[i] = request;
  }

  /** Removes and returns the first `count` requests. */
  take(count: number): Item[] {
    const taken = this.items.slice(this.head, this.head + count);
    this.head += count;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return taken;
  }
}
