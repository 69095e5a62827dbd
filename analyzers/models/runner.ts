import type { z } from 'zod';
import { ErrorCode, PanoptesError, type NodeOutput, type ResolvedModel } from '../../core/index.js';
import type { FrameCacheStats, FramePairs } from '../cache/index.js';
import type { ImageInput, RgbImage } from '../image/index.js';
import type { NamedTensors, TensorData } from '../runtime/index.js';
import { loadStagedModel, type Stageable, type StagedModel } from './staged.js';

/** A tensor of nothing: what a prepared batch keeps of its input once the model has it. */
export const NO_INPUT: TensorData = { type: 'float32', dims: [0], data: new Float32Array(0) };

/** A grey 320×240 frame: what warm-ups and load-time timings run on. */
export const blankImage = (): RgbImage => ({ width: 320, height: 240, data: new Uint8Array(320 * 240 * 3).fill(128) });

/**
 * A model from the zoo, ready to run on images (pixels, or JPEGs its pre-processing decodes):
 * pre-processing, the runtime call and post-processing behind one function. Boxes in outputs are
 * in the pixels of the image given.
 */
export interface ModelRunner<Params = unknown> {
  readonly spec: ResolvedModel;
  /** Checks a node's `params` for this model; throws `PANOPTES_APP_INVALID` naming the bad key. */
  parseParams(params: Record<string, unknown>): Params;
  /**
   * One batch in three phases, so a backend holds the device for `execute` only (Nexus §6.3):
   * `prepare` (CPU: resize, letterbox, stack; native where it resamples), `execute` (the
   * runtime), `finish` (CPU: decode). `streams` names each image's stream (app, node and
   * source), for runners that keep state per stream (a learned cache).
   */
  prepare(images: readonly ImageInput[], params: readonly Params[], streams?: readonly (string | undefined)[]): Promise<Prepared>;
  execute(prepared: Prepared): Promise<Executed>;
  /** May hand its work to a thread of its own (PP-OCR's steps), hence a promise. */
  finish(executed: Executed): NodeOutput[] | Promise<NodeOutput[]>;
  /** The three phases back to back. */
  run(images: readonly ImageInput[], params: readonly Params[]): Promise<NodeOutput[]>;
  /** Its learned caches' figures per stream, where it has any. */
  cacheStats?(): FrameCacheStats[];
  /** The labelled pairs its frame caches hold now, all of them together (`npm run frame-cache-prior` ships them as a prior). */
  framePairs?(): FramePairs;
  /** The model cut into `stages` for group-wise execution (staged.ts), where the runner allows it; one cut per runner, the first call's. */
  staged?(stages: number): Promise<StagedModel>;
  dispose(): Promise<void>;
}

/** What `prepare` made of a batch; only its runner reads it. */
export interface Prepared {
  readonly size: number;
}
/** What `execute` returned, with what `finish` needs of the batch. */
export interface Executed {
  readonly size: number;
}

/**
 * A runner from its three phases, typed on the runner's side; `run` chains them. The casts
 * are where the opaque `Prepared`/`Executed` the backend holds become the runner's own again.
 */
export function phasedRunner<Params, P extends Prepared, E extends Executed>(runner: {
  spec: ResolvedModel;
  parseParams(params: Record<string, unknown>): Params;
  prepare(images: readonly ImageInput[], params: readonly Params[], streams?: readonly (string | undefined)[]): P | Promise<P>;
  execute(prepared: P): Promise<E>;
  finish(executed: E): NodeOutput[] | Promise<NodeOutput[]>;
  cacheStats?(): FrameCacheStats[];
  framePairs?(): FramePairs;
  /** Where `execute` is one plain run of the model file: its feeds and what it returns, so the model can run in stages. */
  stageable?: Pick<Stageable<P, E>, 'runtime' | 'model' | 'feeds' | 'kept' | 'executed'>;
  dispose(): Promise<void>;
}): ModelRunner<Params> {
  const execute = (prepared: Prepared): Promise<Executed> => runner.execute(prepared as P);
  const finish = (executed: Executed): NodeOutput[] | Promise<NodeOutput[]> => runner.finish(executed as E);
  const { stageable } = runner;
  /** Loaded on first use, with the first call's stage count, and disposed with the runner. */
  let staged: Promise<StagedModel> | undefined;
  return {
    spec: runner.spec,
    parseParams: (params) => runner.parseParams(params),
    prepare: async (images, params, streams) => runner.prepare(images, params, streams),
    execute,
    finish,
    run: async (images, params) => finish(await execute(await runner.prepare(images, params))),
    ...(runner.cacheStats ? { cacheStats: runner.cacheStats } : {}),
    ...(runner.framePairs ? { framePairs: runner.framePairs } : {}),
    ...(stageable ? { staged: (stages: number) => (staged ??= loadStagedModel(stages, { ...stageable, finish: runner.finish, blank: async () => runner.prepare([blankImage()], [runner.parseParams({})]) })) } : {}),
    async dispose() {
      try {
        await runner.dispose();
      } finally {
        await (await staged?.catch(() => undefined))?.dispose();
      }
    },
  };
}

export function parseWith<S extends z.ZodType>(schema: S, spec: ResolvedModel, params: Record<string, unknown>): z.infer<S> {
  const parsed = schema.safeParse(params, { reportInput: true });
  if (parsed.success) return parsed.data;
  // Every problem at once, as the config files' errors.
  const problems = parsed.error.issues.map((issue) => {
    const got = 'input' in issue && issue.input !== undefined ? ` (got ${JSON.stringify(issue.input) ?? String(issue.input)})` : '';
    return `params.${issue.path.join('.')}: ${issue.message}${got}`;
  });
  throw new PanoptesError(ErrorCode.AppInvalid, `${problems.join('; ')} for model ${spec.name}`, {
    details: { model: spec.name },
  });
}

/** A model's float32 output `name` of exactly `dims`, or PANOPTES_MODEL_RUN saying what came instead. */
export function float32Output(outputs: NamedTensors, name: string, dims: readonly number[], model: string): Float32Array {
  const t = outputs[name];
  if (!t || t.dims.join(',') !== dims.join(',') || !(t.data instanceof Float32Array)) {
    throw new PanoptesError(
      ErrorCode.ModelRun,
      `${model}: expected float32 ${name} [${dims.join(', ')}], got ${t ? `${t.type} [${t.dims.join(', ')}]` : `outputs ${Object.keys(outputs).join(', ') || 'none'}`}`,
      { details: { model, output: name, dims: t?.dims } },
    );
  }
  return t.data;
}
