import { ErrorCode, PanoptesError, type ResolvedModel } from '../../core/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { loadImageClassifier } from './classifier-models.js';
import { loadFaceAttributes, loadFaceDetector, loadFaceVerifier } from './face-models.js';
import { loadFamilyRunner } from './family.js';
import { loadObjectDetector } from './object-detector.js';
import type { ModelRunner } from './runner.js';
import { loadTextDetector, loadTextRecognizer } from './text-models.js';

/** Which code runs a zoo model, by the architecture its manifest entry names. */
const LOADERS: Record<string, (spec: ResolvedModel, runtime: ModelRuntime) => Promise<ModelRunner>> = {
  centernet: loadObjectDetector,
  blazeface: loadFaceDetector,
  faceres: loadFaceAttributes,
  facemesh: loadFaceVerifier,
  'ppocr-det': loadTextDetector,
  'ppocr-rec': loadTextRecognizer,
  'efficientnet-lite': loadImageClassifier,
};

export async function loadModelRunner(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner> {
  if (spec.family) return loadFamilyRunner(spec, runtime, loadModelRunner) as Promise<ModelRunner>;
  const load = LOADERS[spec.architecture];
  if (!load) {
    throw new PanoptesError(
      ErrorCode.ModelLoad,
      `model ${spec.name}: no runner for architecture "${spec.architecture}" (known: ${Object.keys(LOADERS).join(', ')})`,
      { details: { model: spec.name } },
    );
  }
  return load(spec, runtime);
}

export type { ModelRunner } from './runner.js';
