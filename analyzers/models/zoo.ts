import { ErrorCode, PanoptesError, silentLogger, type Logger, type ParamsRules, type ParamsRulesByArchitecture, type ResolvedModel } from '../../core/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import { classifierParams, loadImageClassifier } from './classifier-models.js';
import {
  faceAttributeParams,
  faceDetectorParams,
  faceIdentityParams,
  faceVerifierParams,
  loadFaceAttributes,
  loadFaceDetector,
  loadFaceIdentities,
  loadFaceVerifier,
} from './face-models.js';
import { loadFamilyRunner } from './family.js';
import { detectorParams, loadObjectDetector, unknownClasses } from './object-detector.js';
import type { ModelRunner } from './runner.js';
import { detParams, loadTextDetector, loadTextRecognizer, recParams } from './text-models.js';

/**
 * Which code runs a zoo model, by the architecture its manifest entry names, and what a node's
 * params for it may be (checked before anything loads; what needs the model's graph, at load).
 */
const ARCHITECTURES: Record<string, { load: (spec: ResolvedModel, runtime: ModelRuntime, logger: Logger) => Promise<ModelRunner>; params: ParamsRules }> = {
  centernet: { load: loadObjectDetector, params: { schema: detectorParams, check: unknownClasses } },
  blazeface: { load: loadFaceDetector, params: { schema: faceDetectorParams } },
  faceres: { load: loadFaceAttributes, params: { schema: faceAttributeParams } },
  facemesh: { load: loadFaceVerifier, params: { schema: faceVerifierParams } },
  'face-embedding': { load: loadFaceIdentities, params: { schema: faceIdentityParams } },
  'ppocr-det': { load: loadTextDetector, params: { schema: detParams } },
  'ppocr-rec': { load: loadTextRecognizer, params: { schema: recParams } },
  'efficientnet-lite': { load: loadImageClassifier, params: { schema: classifierParams } },
};

/** Each architecture's params, for `compileDeployment` (`CompileOptions.params`). */
export const MODEL_PARAMS: ParamsRulesByArchitecture = Object.fromEntries(Object.entries(ARCHITECTURES).map(([name, { params }]) => [name, params]));

function architectureOf(spec: ResolvedModel): (typeof ARCHITECTURES)[string] {
  const known = Object.hasOwn(ARCHITECTURES, spec.architecture) ? ARCHITECTURES[spec.architecture] : undefined;
  if (!known) {
    throw new PanoptesError(
      ErrorCode.ModelLoad,
      `model ${spec.name}: no runner for architecture "${spec.architecture}" (known: ${Object.keys(ARCHITECTURES).join(', ')})`,
      { details: { model: spec.name } },
    );
  }
  return known;
}

/** `logger` hears what a runner does on its own beside the batches (a learned cache exploring, retraining, failing). */
export async function loadModelRunner(spec: ResolvedModel, runtime: ModelRuntime, logger: Logger = silentLogger()): Promise<ModelRunner> {
  if (spec.family) return loadFamilyRunner(spec, runtime, (member, on) => loadModelRunner(member, on, logger)) as Promise<ModelRunner>;
  return architectureOf(spec).load(spec, runtime, logger);
}

export type { ModelRunner } from './runner.js';
