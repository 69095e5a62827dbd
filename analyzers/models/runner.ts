import type { z } from 'zod';
import { ErrorCode, PanoptesError, type NodeOutput, type ResolvedModel } from '../../core/index.js';
import type { RgbImage } from './types.js';

/**
 * A model from the zoo, ready to run on decoded images: pre-processing, the runtime call and
 * post-processing behind one function. Boxes in outputs are in the pixels of the image given.
 */
export interface ModelRunner<Params = unknown> {
  readonly spec: ResolvedModel;
  /** Checks a node's `params` for this model; throws `PANOPTES_APP_INVALID` naming the bad key. */
  parseParams(params: Record<string, unknown>): Params;
  run(images: readonly RgbImage[], params: readonly Params[]): Promise<NodeOutput[]>;
  dispose(): Promise<void>;
}

export function parseWith<S extends z.ZodType>(schema: S, spec: ResolvedModel, params: Record<string, unknown>): z.infer<S> {
  const parsed = schema.safeParse(params, { reportInput: true });
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const got = issue && 'input' in issue && issue.input !== undefined ? ` (got ${JSON.stringify(issue.input)})` : '';
  throw new PanoptesError(ErrorCode.AppInvalid, `params.${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}${got} for model ${spec.name}`, {
    details: { model: spec.name },
  });
}
