/**
 * Models swapped out while lookups may still run on them. A lookup holds a lease on its model
 * from the moment it picks the model until its run ends; a retired model is disposed when its
 * last lease ends, or at once when it has none. Disposing "one retraining later" assumed no
 * lookup spans two retrainings, which a lookup queued behind a long batch on a loaded machine can.
 * A release never waits for the unloading it starts: a request is answered whatever it costs.
 */
export interface Disposable {
  dispose(): Promise<void>;
}

export class Leases<M extends Disposable> {
  readonly #held = new Map<M, number>();
  readonly #retired = new Set<M>();

  /** Holds `model` until the returned release is called (once; later calls do nothing). */
  acquire(model: M): () => void {
    this.#held.set(model, (this.#held.get(model) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.#held.get(model)! - 1;
      if (left > 0) {
        this.#held.set(model, left);
        return;
      }
      this.#held.delete(model);
      // A model that fails to unload went with its worker thread: nothing to keep it for.
      if (this.#retired.delete(model)) void model.dispose().catch(() => undefined);
    };
  }

  /** A model no new lookup will pick: disposed once no lease holds it. */
  async retire(model: M | undefined): Promise<void> {
    if (!model) return;
    if (this.#held.has(model)) this.#retired.add(model);
    else await model.dispose();
  }
}
