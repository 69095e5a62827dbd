export { decodeJpeg, encodeJpeg } from './jpeg.js';
