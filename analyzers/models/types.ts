export type { Box, Detection, TextLine } from '../../core/index.js';

/** A decoded image: interleaved RGB, 3 bytes per pixel, row-major. */
export interface RgbImage {
  width: number;
  height: number;
  data: Uint8Array;
}

/** A tensor handed to or returned by a model: data plus dims, no runtime types. */
export interface TensorData {
  data: Float32Array | Int32Array | BigInt64Array | Uint8Array;
  dims: number[];
  type: 'float32' | 'int32' | 'int64' | 'uint8';
}

export type NamedTensors = Record<string, TensorData>;

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
