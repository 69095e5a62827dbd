export { downgradeToFit, zooVariants, type Downgrade, type Variant, type VariantPlan } from './variants.js';
export { idleTimeByBackend, occupancy, planIdleTime, type DelayTolerantDemand, type IdleTimePlan } from './delay-tolerant.js';
export {
  batchProfileSchema,
  compileProfile,
  LATENCY_STD_FACTOR,
  linearProfile,
  loadProfileFile,
  loadProfiles,
  profileLookup,
  profileWarnings,
  warningsFor,
  type BatchMeasurement,
  type BatchProfile,
  type ModelProfile,
  type ProfileLookup,
} from './profile.js';
export { batchFor, EPSILON, gpuBudgetMs, peakThroughput } from './worst-case.js';
export { sessionId, squishyBinPacking, type GpuNode, type NodeSession, type Packing, type PackOptions, type Session } from './squishy.js';
export { countModelMoves, repack } from './repack.js';
export { planViolations } from './plan-check.js';
export { fewestGpus, MAX_BRUTE_FORCE_SESSIONS } from './optimal.js';
export { jointSplit, sessionsOf, type AppQuery } from './joint-split.js';
export { analyzeQuery, fanInNodes, FRAMES, queryGpus, type QueryAnalysisOptions, type QueryEdge, type QuerySpec, type QuerySplit } from './query-analysis.js';
export { batchObliviousAllocation } from './baselines.js';
export { evenSloSplit, type AppGraph } from '../analyzers/index.js';
export { mergeSharedPrefixes, type PrefixFamily, type PrefixMerge } from './prefix-merge.js';
export { edgeKey, planEpoch, replanDue, type ReplanRule, type AppDemand, type EpochInput, type EpochOptions, type EpochPlan, type EpochState } from './epoch.js';
export { appDemands, createEpochService, type EpochServiceOptions, type EpochServiceStatus } from './epoch-service.js';
export {
  arrivalStream,
  earlyDropVsLazy,
  efficiencyVsLowerBound,
  EXPERIMENT_NAMES,
  maxGoodLoad,
  PAPER_PROFILES,
  paperProfiles,
  planningTime,
  queryAnalysisVsEven,
  reaction,
  runExperiments,
  runSimulation,
  seededRandom,
  squishyVsOblivious,
  onTimeRatio,
  lteLikeLink,
  variantsVsDropping,
  type OnTimePolicy,
  type ArrivalKind,
  type ArrivalSpec,
  type BatchRecord,
  type Counts,
  type EarlyDropFigures,
  type EfficiencyFigures,
  type ExperimentName,
  type MaxGoodLoadOptions,
  type PaperModel,
  type PlanningFigures,
  type QueryAnalysisFigures,
  type RateSchedule,
  type RateStep,
  type ReactionFigures,
  type ReplanOptions,
  type SimSession,
  type SimulationConfig,
  type SimulationResult,
  type SquishyFigures,
} from './simulator/index.js';
