export { loadTensorFlow, trainHead, type HeadJob, type TrainedHead } from './head.js';
export { minibatchOf, trainCacheHead, type CacheHeadJob, type TrainedCache } from './cache-head.js';
export { createHeadTrainer, type HeadTrainer } from './trainer.js';
