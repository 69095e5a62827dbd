export { cocoLabels, cocoClassName, COCO_CLASS_COUNT } from './coco.js';
export {
  CENTERNET,
  CENTERNET_DEFAULT_MIN_SCORE,
  preprocess as preprocessCenternet,
  decode as decodeCenternet,
  type DecodeOptions,
  type Preprocessed,
} from './centernet.js';
export { nms, iou, boxArea, sameObjects, matchedObjects, type NmsOptions } from './nms.js';
export { letterboxBatch, letterboxBatchNative, letterboxFor, placement, letterboxInto, sourceSize, boxToInput, boxToSource, clipBox } from './letterbox.js';
