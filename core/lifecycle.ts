/** Every long-running component: start, stop intake and finish in-flight work, release resources. */
export interface Lifecycle<Status = unknown> {
  start(): Promise<void>;
  /** Stop taking new work and finish what is in flight. */
  drain(): Promise<void>;
  close(): Promise<void>;
  status(): Status;
}
