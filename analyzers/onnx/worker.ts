import { parentPort } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { describeError, ErrorCode, PanoptesError, serializeError } from '../../core/index.js';
import type { NamedTensors } from '../runtime/index.js';
import { transferList, type WorkerRequest, type WorkerResponse } from './protocol.js';

/** Hosts ONNX sessions off the main thread; one request at a time, in arrival order. */

const sessions = new Map<string, ort.InferenceSession>();
const port = parentPort;
if (!port) throw new Error('analyzers/onnx/worker must run in a worker thread');

let queue = Promise.resolve();
port.on('message', (request: WorkerRequest) => {
  queue = queue.then(() => handle(request));
});

async function handle(request: WorkerRequest): Promise<void> {
  try {
    const response = await serve(request);
    port?.postMessage(response, response.type === 'ran' ? transferList(response.outputs) : []);
  } catch (err) {
    port?.postMessage({ type: 'failed', id: request.id, error: serializeError(err) } satisfies WorkerResponse);
  }
}

async function serve(request: WorkerRequest): Promise<WorkerResponse> {
  switch (request.type) {
    case 'load': {
      const session = await ort.InferenceSession.create(request.file, {
        intraOpNumThreads: request.intraOpThreads,
        graphOptimizationLevel: 'all',
        extra: { session: { intra_op: { allow_spinning: request.spinning ? '1' : '0' } } },
      }).catch((err: unknown) => {
        throw new PanoptesError(ErrorCode.ModelLoad, `cannot load model ${request.modelId} from ${request.file}: ${describeError(err)}`, {
          cause: err,
          details: { model: request.modelId, file: request.file, reason: String(err) },
        });
      });
      sessions.set(request.modelId, session);
      return { type: 'loaded', id: request.id, inputNames: [...session.inputNames], outputNames: [...session.outputNames] };
    }
    case 'run': {
      const results = await run(request.modelId, request.feeds);
      const outputs: NamedTensors = {};
      for (const [name, tensor] of Object.entries(results)) {
        outputs[name] = { type: tensor.type as never, data: tensor.data as never, dims: [...tensor.dims] };
      }
      return { type: 'ran', id: request.id, outputs };
    }
    case 'time': {
      // One run untimed (the first of a session allocates), then the runs timed back to back.
      await run(request.modelId, request.feeds);
      const started = performance.now();
      const runs = Math.max(1, request.runs);
      for (let i = 0; i < runs; i++) await run(request.modelId, request.feeds);
      return { type: 'timed', id: request.id, ms: (performance.now() - started) / runs };
    }
    case 'unload': {
      await sessions.get(request.modelId)?.release();
      sessions.delete(request.modelId);
      return { type: 'unloaded', id: request.id };
    }
  }
}

async function run(modelId: string, tensors: NamedTensors): Promise<ort.InferenceSession.ReturnType> {
  const session = sessions.get(modelId);
  if (!session) throw new PanoptesError(ErrorCode.ModelRun, `model ${modelId} is not loaded`);
  const feeds: Record<string, ort.Tensor> = {};
  for (const [name, t] of Object.entries(tensors)) feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
  return session.run(feeds).catch((err: unknown) => {
    throw new PanoptesError(ErrorCode.ModelRun, `model ${modelId} failed: ${String(err)}`, { cause: err, details: { model: modelId } });
  });
}
