import { z } from 'zod';
import { randomBytes } from 'node:crypto';
import { classifierCacheSchema, ErrorCode, PanoptesError, silentLogger, specializedNodeOf, type Logger, type NodeOutput, type ResolvedModel } from '../../core/index.js';
import { blockOutputs, readOnnxModel } from '../onnx/index.js';
import type { ModelRuntime } from '../runtime/index.js';
import {
  BLAZEFACE,
  BLAZEFACE_DEFAULT_IOU,
  BLAZEFACE_DEFAULT_MIN_SCORE,
  FACEMESH,
  FACEMESH_DEFAULT_MIN_SCORE,
  FACERES,
  FACERES_DEFAULT_MALE_THRESHOLD,
  decodeFacemesh,
  decodeFaceres,
  decodeFaces,
  faceresClassAttributes,
  faceresClasses,
  createIdentityGallery,
  unit,
  type IdentityGallery,
} from './face/index.js';
import { letterboxBatchNative } from './detector/index.js';
import { createNodeCaches } from './node-caches.js';
import { float32Output, parseWith, phasedRunner, type ModelRunner } from './runner.js';

export const faceDetectorParams = z.strictObject({
  minScore: z.number().min(0).max(1).default(BLAZEFACE_DEFAULT_MIN_SCORE),
  iouThreshold: z.number().min(0).max(1).default(BLAZEFACE_DEFAULT_IOU),
  maxDetections: z.number().int().positive().default(100),
});
type FaceDetectorParams = z.infer<typeof faceDetectorParams>;

/** Face detection with BlazeFace: letterbox, run, decode; every detection is class `face` (id 0). */
export async function loadFaceDetector(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner<FaceDetectorParams>> {
  const inputSize = spec.inputSize ?? BLAZEFACE.inputSize;
  if (inputSize !== BLAZEFACE.inputSize) {
    throw new PanoptesError(ErrorCode.ModelLoad, `model ${spec.name}: blazeface takes ${BLAZEFACE.inputSize}x${BLAZEFACE.inputSize} input (its anchors are fixed), got inputSize ${inputSize}`, {
      details: { model: spec.name },
    });
  }
  const model = await runtime.load({ name: spec.name, file: spec.file });
  return phasedRunner({
    spec,
    parseParams: (params) => parseWith(faceDetectorParams, spec, params),
    async prepare(images, params) {
      const { input, letterboxes } = await letterboxBatchNative(images, inputSize, spec.name);
      return { size: images.length, input, letterboxes, params };
    },
    async execute(prepared) {
      const outputs = await model.run({ [model.inputNames[0] ?? BLAZEFACE.inputName]: prepared.input });
      return { size: prepared.size, outputs, letterboxes: prepared.letterboxes, params: prepared.params };
    },
    finish: ({ outputs, letterboxes, params }) =>
      decodeFaces(outputs, letterboxes, params).map((detections) => ({ kind: 'detections' as const, detections })),
    dispose: () => model.dispose(),
  });
}

export const faceAttributeParams = z.strictObject({
  /** Gender sigmoid at or above which a face is `male` (the model's authors use 0.6, the human library 0.5). */
  maleThreshold: z.number().gt(0).lt(1).default(FACERES_DEFAULT_MALE_THRESHOLD),
  /** The node's `cache:` (a learned cache), which the DAG runner passes here. */
  cache: classifierCacheSchema.optional(),
});
type FaceAttributeParams = z.infer<typeof faceAttributeParams>;

/**
 * Age and gender of face crops with FaceRes: one `attributes` output per crop, `age` then
 * `gender`. Rows of nodes with a `cache:` run through that node's learned caches, whose hits
 * answer the age to the decade (`faceresClasses`, docs/learned-caches.md).
 */
export async function loadFaceAttributes(spec: ResolvedModel, runtime: ModelRuntime, logger: Logger = silentLogger()): Promise<ModelRunner<FaceAttributeParams>> {
  const model = await runtime.load({ name: spec.name, file: spec.file });
  const inputName = model.inputNames[0] ?? FACERES.inputName;
  const caches = createNodeCaches<FaceAttributeParams>({
    spec,
    runtime,
    model,
    inputName,
    inputSize: FACERES.inputSize,
    candidateLayers: blockOutputs(await readOnnxModel(spec.file)),
    cacheOf: ({ cache, maleThreshold }) =>
      cache && { config: cache, key: JSON.stringify([cache, maleThreshold]), probabilitiesOf: (outputs) => faceresClasses(outputs, outputs.gender?.dims[0] ?? 0, maleThreshold) },
    logger,
  });
  return phasedRunner({
    spec,
    parseParams(params) {
      const parsed = parseWith(faceAttributeParams, spec, params);
      const missing = caches.missingLayer(parsed.cache?.layers ?? []);
      if (missing) throw missing;
      return parsed;
    },
    prepare: async (images, params, streams) => ({ size: images.length, input: (await letterboxBatchNative(images, FACERES.inputSize, spec.name)).input, params, streams }),
    execute: async ({ input, params, streams }) => ({ ...(await caches.execute(input, params, streams)), params }),
    finish: ({ size, outputs, plain, cached, params }) => {
      const results: NodeOutput[] = new Array(size);
      const rows = plain ?? Array.from({ length: size }, (_, i) => i);
      if (outputs) decodeFaceres(outputs, rows.length, rows.map((r) => params[r]!)).forEach((attributes, i) => (results[rows[i]!] = { kind: 'attributes', attributes }));
      for (const [row, { answer, score, exit, outputs: own, predicted }] of cached ?? []) {
        const attributes = own ? decodeFaceres(own(), 1, [params[row]!])[0]! : faceresClassAttributes(answer, score, predicted);
        results[row] = { kind: 'attributes', attributes, exit };
      }
      return results;
    },
    cacheStats: () => caches.stats(),
    async dispose() {
      await caches.close();
      await model.dispose();
    },
  });
}

export const faceVerifierParams = z.strictObject({
  /** Face-presence confidence at or above which a crop is a face (the human library keeps faces above 0.2). */
  minScore: z.number().min(0).max(1).default(FACEMESH_DEFAULT_MIN_SCORE),
});
type FaceVerifierParams = z.infer<typeof faceVerifierParams>;

/**
 * Face verification with FaceMesh: per face crop, one `face` detection (id 0) with the model's
 * face-presence confidence and the bounding box of its 468 landmarks, or none below `minScore`.
 */
export async function loadFaceVerifier(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner<FaceVerifierParams>> {
  const inputSize = spec.inputSize ?? FACEMESH.inputSize;
  if (inputSize !== FACEMESH.inputSize) {
    throw new PanoptesError(ErrorCode.ModelLoad, `model ${spec.name}: facemesh takes ${FACEMESH.inputSize}x${FACEMESH.inputSize} input, got inputSize ${inputSize}`, {
      details: { model: spec.name },
    });
  }
  const model = await runtime.load({ name: spec.name, file: spec.file });
  return phasedRunner({
    spec,
    parseParams: (params) => parseWith(faceVerifierParams, spec, params),
    async prepare(images, params) {
      const { input, letterboxes } = await letterboxBatchNative(images, inputSize, spec.name);
      return { size: images.length, input, letterboxes, params };
    },
    async execute(prepared) {
      const outputs = await model.run({ [model.inputNames[0] ?? FACEMESH.inputName]: prepared.input });
      return { size: prepared.size, outputs, letterboxes: prepared.letterboxes, params: prepared.params };
    },
    finish: ({ outputs, letterboxes, params }) =>
      decodeFacemesh(outputs, letterboxes, params).map((detections) => ({ kind: 'detections' as const, detections })),
    dispose: () => model.dispose(),
  });
}

export const faceIdentityParams = z.strictObject({
  /** Cosine similarity of descriptors from which a face is an identity's (the weg bench enrols at 0.7). */
  sameIdentity: z.number().gt(0).max(1).default(0.7),
  /** Identities a node keeps; a new one lets the one seen longest ago go (each face is compared with every one, on the event loop). */
  maxIdentities: z.number().int().min(1).max(10_000).default(1_000),
});
type FaceIdentityParams = z.infer<typeof faceIdentityParams>;

/**
 * The process's identity galleries, per model and app node: they outlive a runner that a plan
 * unloads and loads again. Each gallery's ids carry a tag of their own (`person-k3x9-12`), so two
 * processes (backends) enrolling for one node never give one id to two people.
 */
const galleries = new Map<string, IdentityGallery>();

/**
 * Identities of face crops from a face-embedding network's `features` output (FaceRes' 1024-d
 * descriptor, MobileFace's 256-d): one `identity` attribute per crop, enrolled online per node
 * across its streams (`face/identities.ts`; the same person before two cameras of one backend is
 * one identity). The crop's unit descriptor is handed on as its `features`, so the model can also
 * be a specialization template; as one (a node id `node~template`) it enrols no identities.
 */
export async function loadFaceIdentities(spec: ResolvedModel, runtime: ModelRuntime): Promise<ModelRunner<FaceIdentityParams>> {
  const inputSize = spec.inputSize ?? FACERES.inputSize;
  const model = await runtime.load({ name: spec.name, file: spec.file });
  /** The gallery of a stream's node (a stream is app/node/source); none for a template's runs. */
  const galleryOf = (stream: string | undefined, params: FaceIdentityParams): IdentityGallery | undefined => {
    const node = stream?.split('/').slice(0, 2).join('/') ?? '';
    if (specializedNodeOf(node) !== undefined) return undefined;
    const key = `${spec.name}:${node}`;
    let gallery = galleries.get(key);
    if (!gallery) galleries.set(key, (gallery = createIdentityGallery({ ...params, prefix: `person-${randomBytes(3).toString('hex')}-` })));
    return gallery;
  };
  return phasedRunner({
    spec,
    parseParams: (params) => parseWith(faceIdentityParams, spec, params),
    prepare: async (images, params, streams) => ({ size: images.length, input: (await letterboxBatchNative(images, inputSize, spec.name)).input, params, streams }),
    async execute({ size, input, params, streams }) {
      const outputs = await model.run({ [model.inputNames[0] ?? 'images']: input });
      return { size, outputs, params, streams };
    },
    finish: ({ size, outputs, params, streams }) => {
      const width = outputs.features?.dims[1] ?? 0;
      const descriptors = float32Output(outputs, 'features', [size, width], spec.name);
      return params.map((p, i) => {
        const features = unit(descriptors.subarray(i * width, (i + 1) * width));
        const identified = galleryOf(streams?.[i], p)?.identify(features);
        const attributes = identified ? [{ name: 'identity', value: identified.id, number: 0, score: Math.max(0, identified.similarity) }] : [];
        return { kind: 'attributes' as const, attributes, features };
      });
    },
    dispose: () => model.dispose(),
  });
}
