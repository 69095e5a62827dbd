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
