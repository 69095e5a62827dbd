/**
 * Backpressure for producers: a send that does not fit in the bus's memory budget waits here
 * until consumers commit enough to free room. First come, first served across all producers,
 * so a large send is not starved by a stream of small ones, and one producer's sends are stored
 * in the order it made them (per-key order starts here).
 */

export interface PendingSend {
  /** Identity of the producer, to keep its sends in order. */
  readonly producer: object;
  /** Stores the records and resolves the caller's promise. */
  store(): void;
  reject(err: Error): void;
}

export class SendQueue<Send extends PendingSend> {
  private waiting: Send[] = [];

  constructor(
    /** Whether the send may be stored now. */
    private readonly fits: (send: Send) => boolean,
  ) {}

  get length(): number {
    return this.waiting.length;
  }

  /** Stores the send now if nothing waits ahead of it and it fits; otherwise queues it. */
  enqueue(send: Send): void {
    this.waiting.push(send);
    this.drain();
  }

  /**
   * Stores the send now whatever the budget says (a send from inside a batch handler; see
   * `handlerScope`). Its producer's earlier waiting sends go first, to keep that producer's order.
   */
  storeNow(send: Send): void {
    const earlier = this.waiting.filter((other) => other.producer === send.producer);
    this.waiting = this.waiting.filter((other) => other.producer !== send.producer);
    for (const other of earlier) other.store();
    send.store();
  }

  /** Stores waiting sends, in order, while the one at the head fits. Call when room was freed. */
  drain(): void {
    while (this.waiting.length > 0) {
      const head = this.waiting[0];
      if (!head || !this.fits(head)) return;
      this.waiting.shift();
      head.store();
    }
  }

  /** Rejects the waiting sends of one producer (or of all when `producer` is undefined). */
  rejectWaiting(err: Error, producer?: object): void {
    const rejected = this.waiting.filter((send) => producer === undefined || send.producer === producer);
    this.waiting = this.waiting.filter((send) => !rejected.includes(send));
    for (const send of rejected) send.reject(err);
    this.drain();
  }
}
