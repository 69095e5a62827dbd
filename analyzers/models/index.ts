export type * from './types.js';
export { loadModelRunner, type ModelRunner } from './zoo.js';
export { blankImage, type Executed, type Prepared } from './runner.js';
export type { StagedItem, StagedModel } from './staged.js';
export { cropImage } from './ocr/index.js';
export { letterboxBatchNative, sameObjects, matchedObjects } from './detector/index.js';
export { cpuDeviceName, profileModel, type BatchTiming, type ModelTimings, type ProfileOptions } from './profile.js';
export { findPrefixFamilies, type FamilyParams } from './family.js';
export { loadFeatureExtractor, topClasses, type FeatureExtractor } from './classifier-models.js';
