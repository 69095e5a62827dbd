export {
  composeCaches,
  DEFAULT_ACCURACY_TARGET,
  DEFAULT_ALPHAS,
  effectiveHitRates,
  expectedAccuracy,
  expectedLatency,
  greedyComposition,
  latencyGain,
  solveComposition,
  violation,
  type CacheVariant,
  type Composition,
  type CompositionProblem,
} from './composition.js';
export {
  CONV_CHANNELS,
  convOutput,
  defaultVariants,
  denseInput,
  parameterCount,
  parseVariant,
  poolWindow,
  SELECTOR_HIDDEN,
  variantName,
  weightShapes,
  type HiddenShape,
  type VariantSpec,
} from './variant.js';
export { encodeFrozenModel, encodeLookupModel, frozenModel, LOOKUP_FEATURES, LOOKUP_HIT, LOOKUP_INPUT, LOOKUP_PROBABILITIES, lookupModel, type CacheWeights } from './lookup-model.js';
export { loadSegmentedModel, type SegmentedModel } from './segmented-model.js';
export { createCachedModel, type CachedAnswer, type CachedModel, type CachedModelOptions, type ClassDistribution, type EnabledCache } from './cached-model.js';
export { cacheTargets, calibrate, exploreCaches, type Exploration, type ExploredVariant, type ExploreOptions } from './explore.js';
export { argMax, concat, pick, rowOf } from './tensors.js';
export { belowTarget, createCacheAdaptation, type CacheAdaptation, type CacheAdaptationOptions } from './adaptation.js';
export { createFrameCache, type FrameCache, type FrameCacheConfig, type FrameCacheOptions, type FrameCacheStats, type FrameExit } from './frame-cache.js';
export { framePriorFile, readFramePrior, writeFramePrior, type FramePrior } from './frame-prior.js';
export { fitFrameSelector, FRAME_HIDDEN, FRAME_POOLED, FRAME_PROBABILITIES, FRAME_REFERENCE, frameSelectorModel, type FittedSelector, type FramePairs } from './frame-selector.js';
export { createClassifierCache, type ClassifiedRow, type ClassifierCache, type ClassifierCacheOptions } from './classifier-cache.js';
