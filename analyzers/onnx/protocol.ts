import type { SerializedError } from '../../core/index.js';
import type { NamedTensors } from '../runtime/index.js';

/** Messages between the runtime and its worker threads. */
export type WorkerRequest =
  | { type: 'load'; id: number; modelId: string; file: string; intraOpThreads: number; spinning: boolean }
  | { type: 'run'; id: number; modelId: string; feeds: NamedTensors }
  | { type: 'time'; id: number; modelId: string; feeds: NamedTensors; runs: number }
  | { type: 'unload'; id: number; modelId: string };

export type WorkerResponse =
  | { type: 'loaded'; id: number; inputNames: string[]; outputNames: string[] }
  | { type: 'ran'; id: number; outputs: NamedTensors }
  | { type: 'timed'; id: number; ms: number }
  | { type: 'unloaded'; id: number }
  | { type: 'failed'; id: number; error: SerializedError };

export function transferList(tensors: NamedTensors): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const t of Object.values(tensors)) {
    if (t.data.buffer instanceof ArrayBuffer) buffers.add(t.data.buffer);
  }
  return [...buffers];
}
