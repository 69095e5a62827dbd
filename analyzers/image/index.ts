export { decodeJpeg, encodeJpeg, type RgbImage } from './jpeg.js';
