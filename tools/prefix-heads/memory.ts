import { fork } from 'node:child_process';
import type { PrefixBatchFiles } from '../../analyzers/index.js';

/** What a fresh process loads: whole models, or one prefix-batched model. */
export type MemoryProbe = ({ models: readonly string[] } | { split: PrefixBatchFiles }) & {
  /** Images per model (or member) to run once after loading; 0 to load only. */
  rows: number;
  /** The shape of one image for the models' only input, e.g. [512, 512, 3]. */
  rowShape: readonly number[];
};

export interface MemoryFigures {
  /** The process's RSS growth from loading the models: weights, sessions, their threads. */
  loadMB: number;
  /** Its highest RSS, once the models ran one batch (activations too), less the same baseline. */
  peakMB: number;
}

/**
 * Measures in a fresh process, so that nothing an earlier measurement freed (and malloc kept)
 * is reused: the models run on the project's onnxruntime adapter, on one worker thread.
 */
export async function measureMemory(probe: MemoryProbe): Promise<MemoryFigures> {
  const fromSource = import.meta.url.endsWith('.ts');
  const child = fork(new URL(fromSource ? './probe.ts' : './probe.js', import.meta.url), {
    execArgv: fromSource ? ['--import', import.meta.resolve('tsx')] : [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let figures: MemoryFigures | undefined;
    child.on('message', (message: MemoryFigures) => (figures = message));
    child.on('error', reject);
    child.on('exit', (code) => (figures ? resolve(figures) : reject(new Error(`memory probe exited with code ${code} before reporting`))));
    child.send(probe);
  });
}
