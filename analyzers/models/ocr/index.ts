export { loadCharset, CTC_BLANK_INDEX } from './charset.js';
export type { CharsetOptions } from './charset.js';
export { cropImage, cropQuad, emptyRgb, resizeRgb } from './crop.js';
export { convexHull, decodeDet, preprocessDet } from './det.js';
export type { DetDecodeOptions, DetGeometry, DetInput, DetPreprocessOptions, TextBox } from './det.js';
export type { Point, Quad } from './geometry.js';
export { ctcDecode, preprocessRec } from './rec.js';
export type { CtcDecodeOptions, RecPreprocessOptions, RecResult } from './rec.js';
export { createOcrSteps, type OcrSteps } from './steps.js';
