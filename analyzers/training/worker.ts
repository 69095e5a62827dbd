import { serveRequests } from '../../core/index.js';
import { trainCacheHead } from './cache-head.js';
import { trainHead } from './head.js';
import { transfers, type TrainingRequest } from './trainer.js';

/** The training thread: one job at a time, so the thread that serves models never waits on training. */
serveRequests<TrainingRequest>(
  async (request) => {
    const trained = request.kind === 'cache' ? await trainCacheHead(request.job) : await trainHead(request.job);
    return { result: trained, transfer: transfers(trained) };
  },
  // An abort of TensorFlow.js' WebAssembly (a WebAssembly.RuntimeError: its heap exhausted) leaves
  // it unusable: the next job gets a fresh thread.
  (err) => err instanceof Error && err.name === 'RuntimeError',
);
