import type { AppLogic, AppNode, Drop, Frame, FrameRef, NodeOutput, ResultRow, Task } from '../../core/index.js';
import type { ImageInput } from '../image/index.js';
import type { StageBudgets } from './stage-deadlines.js';

/** What running a DAG makes: rows, tasks for child stages on other sessions, and drops with their reasons. */
export interface DagOutbox {
  row(row: ResultRow): void;
  /** A crop for a child node that runs `model`; a delay-tolerant source's travel apart (Topics.backfillTasks). */
  task(model: string, task: Task, delayTolerant: boolean): void;
  drop(what: Drop['what'], why: string, detail: string, at: { source?: string; seq?: number }): void;
}

/** A node's request that early drop took out of its queue: it could not finish by its stage deadline. */
export class DeadlineMissed extends Error {
  constructor() {
    super('dropped early: it could not finish by its stage deadline');
  }
}

/** A node of an app's DAG on this backend. */
export interface DagNode {
  app: string;
  node: string;
  model: string;
}

export interface DagRunnerOptions {
  apps: readonly AppLogic[];
  /** A node's params, checked by its model (throws on bad ones). */
  parseParams(model: string, params: AppNode['params']): Promise<unknown>;
  /** Runs one image of `frame` through the node's session by `deadlineMs`; rejects with `DeadlineMissed` when early drop drops it. */
  infer(node: DagNode, image: ImageInput, params: unknown, deadlineMs: number, frame: FrameRef): Promise<NodeOutput>;
  /** An app's stage budgets now (the plan's); undefined before a plan gives them: the even split. */
  budgets(app: string): StageBudgets | undefined;
  /** Whether a source's requests must meet their deadlines; the others are delay-tolerant. */
  realtime(source: string): boolean;
  /** How a crop travels to a child stage: as the raw pixels cut from the frame (in process) or as a JPEG (Kafka). */
  crops: 'pixels' | 'jpeg';
  /** Child tasks made by one parent output along an edge (the fan-out γ the scheduler measures). */
  onFanOut(app: string, from: string, to: string, children: number): void;
  /** Keeps an event's picture (a JPEG) and says where: the path its row records; absent, events get none. */
  snapshots?: SnapshotStore;
  /** A picture that could not be made (its event's row goes on without one). */
  onSnapshotError?: (err: unknown) => void;
}

export interface SnapshotStore {
  /** Stores the JPEG of `row`'s event; resolves with its path under the snapshots folder, or undefined when it could not be stored. */
  save(row: ResultRow, jpeg: Uint8Array): Promise<string | undefined>;
}

export interface DagRunner {
  readonly apps: readonly AppLogic[];
  /** Checks every node's params with its model; throws naming the app and node. */
  start(): Promise<void>;
  /** Models of every node, the apps' roots' included. */
  models(): string[];
  /**
   * Runs a frame through the roots of the apps that analyze it; `after` is the previous frame of
   * the batch, so rows come in order. `backfill`: it came on a backfill topic, so it is
   * delay-tolerant whatever this process knows of its source.
   */
  runFrame(frame: Frame, apps: readonly string[], out: DagOutbox, after: Promise<unknown>, backfill?: boolean): Promise<void>;
  /** Runs a crop (task) through the node it names; `backfill` as for frames. */
  runTask(task: Task, out: DagOutbox, backfill?: boolean): Promise<void>;
  /** First-node outputs an ingest worker made itself, used instead of running the node. */
  localOutputs(): number;
}
