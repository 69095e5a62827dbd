import { ErrorCode, PanoptesError, silentLogger, type Logger, type ResolvedModel } from '../../core/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { loadImageClassifier } from './classifier-models.js';
import { loadFaceAttributes, loadFaceDetector, loadFaceIdentities, loadFaceVerifier } from './face-models.js';
import { loadFamilyRunner } from './family.js';
import { loadObjectDetector } from './object-detector.js';
import type { ModelRunner } from './runner.js';
import { loadTextDetector, loadTextRecognizer } from './text-models.js';

/** Which code runs a zoo model, by the architecture its manifest entry names. */
const LOADERS: Record<string, (spec: ResolvedModel, runtime: ModelRuntime, logger: Logger) => Promise<ModelRunner>> = {
  centernet: loadObjectDetector,
  blazeface: loadFaceDetector,
  faceres: loadFaceAttributes,
  facemesh: loadFaceVerifier,
  'face-embedding': loadFaceIdentities,
  'ppocr-det': loadTextDetector,
  'ppocr-rec': loadTextRecognizer,
  'efficientnet-lite': loadImageClassifier,
};

/** `logger` hears what a runner does on its own beside the batches (a learned cache exploring, retraining, failing). */
export async function loadModelRunner(spec: ResolvedModel, runtime: ModelRuntime, logger: Logger = silentLogger()): Promise<ModelRunner> {
  if (spec.family) return loadFamilyRunner(spec, runtime, (member, on) => loadModelRunner(member, on, logger)) as Promise<ModelRunner>;
  const load = LOADERS[spec.architecture];
  if (!load) {
    throw new PanoptesError(
      ErrorCode.ModelLoad,
      `model ${spec.name}: no runner for architecture "${spec.architecture}" (known: ${Object.keys(LOADERS).join(', ')})`,
      { details: { model: spec.name } },
    );
  }
  return load(spec, runtime, logger);
}

export type { ModelRunner } from './runner.js';
