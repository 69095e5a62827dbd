export { decodeJpeg, encodeJpeg, type RgbImage } from './jpeg.js';
export { placeImage, type Placement } from './letterbox.js';
