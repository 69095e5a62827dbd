export { loadTensorFlow, trainHead, type HeadJob, type TrainedHead } from './head.js';
export { createHeadTrainer, type HeadTrainer } from './trainer.js';
