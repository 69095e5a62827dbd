/** A tensor handed to or returned by a model: data plus dims, no runtime types. */
export interface TensorData {
  data: Float32Array | Int32Array | BigInt64Array | Uint8Array;
  dims: number[];
  type: 'float32' | 'int32' | 'int64' | 'uint8';
}

export type NamedTensors = Record<string, TensorData>;

/**
 * The model-runtime port: load a model file, run it on named tensors. The onnxruntime-node
 * adapter runs sessions on worker threads, because a session's `run` blocks its thread.
 * Not in the port: execution-provider details, profiling, graph surgery.
 */
export interface ModelRuntime {
  readonly name: string;
  /** Batches it runs at once (its worker threads, each with its share of the cores). */
  readonly lanes: number;
  load(model: { name: string; file: string }): Promise<LoadedModel>;
  /**
   * A runtime of its own beside this one (its own thread, `threads` cores for a run), for work
   * that must not queue behind this one's batches: a learned cache's asynchronous lookups. Its
   * owner closes it. Absent where the runtime has no such thing.
   */
  beside?(threads: number): ModelRuntime;
  close(): Promise<void>;
}

export interface LoadedModel {
  readonly name: string;
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  /** Runs one batch. Takes ownership of the feeds' buffers (they are moved to the worker). */
  run(feeds: NamedTensors): Promise<NamedTensors>;
  /**
   * The mean time of one run on the feeds, of `runs` back to back on the model's thread (after
   * one untimed): what a run costs, apart from the other batches its thread serves and the
   * hand-offs. Absent where the runtime cannot tell. Takes ownership of the feeds' buffers.
   */
  time?(feeds: NamedTensors, runs: number): Promise<number>;
  dispose(): Promise<void>;
}
