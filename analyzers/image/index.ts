export { decodeJpeg, encodeJpeg, isJpeg, jpegImage, pixelsOf, type ImageInput, type JpegImage, type RgbImage } from './jpeg.js';
export { placeImage, type Placement } from './letterbox.js';
export { annotatedJpeg, type LabelledBox } from './annotate.js';
