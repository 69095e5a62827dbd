export {
  atLeast,
  behaviourByDominant,
  cascadeAccuracy,
  dominantClasses,
  minimumSupport,
  oracleOutputChances,
  windowDetection,
  type SkewedStream,
  type SpecializedBehaviour,
} from './estimates.js';
export { createWeg, type Template, type Weg, type WegAction, type WegParams, type WegPhase, type WegStatus } from './weg.js';
export { simulateWeg, type SimulatedClassifiers, type TraceSegment, type WegSimulation } from './simulate.js';
export { measureBehaviour, sample, trainingSet, type LabelledPool, type MeasuredBehaviour } from './pool.js';
export { createSpecializer, type Classified, type Specializer, type SpecializerOptions, type SpecializerStatus, type SpecializerTemplate } from './specializer.js';
export { createStreamPool, type StreamPool, type StreamPoolOptions } from './stream-pool.js';
