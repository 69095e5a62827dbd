/** The vocabulary of pre- and post-processing, in one place for the files of this folder. */
export type { Attribute, Box, Detection, TextLine } from '../../core/index.js';
export type { RgbImage } from '../image/index.js';
export type { NamedTensors, TensorData } from '../runtime/index.js';

/**
 * How an input image was placed into the model's input: scale then pad. Used to map boxes back.
 * model = original * scale + pad.
 */
export interface Letterbox {
  scale: number;
  padX: number;
  padY: number;
  inputWidth: number;
  inputHeight: number;
}
