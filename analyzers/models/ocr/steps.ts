import { createWorkerClient } from '../../../core/index.js';
import type { RgbImage, TensorData } from '../types.js';
import type { DetDecodeOptions, DetGeometry, DetInput, DetPreprocessOptions, TextBox } from './det.js';
import type { RecResult } from './rec.js';

/**
 * PP-OCR's steps around its models, element by element (resizing and normalising crops, the DB
 * map's binarisation and connected components, CTC's arg-max), on a thread of their own, off the
 * event loop. libvips was measured slower for the small crops the apps read (docs/performance.md).
 */
export interface OcrSteps {
  preprocessDet(image: RgbImage, options: DetPreprocessOptions): Promise<DetInput>;
  /** Takes `map`'s buffer (the model's output: it moves to the thread). */
  decodeDet(map: TensorData, geometry: DetGeometry, options: DetDecodeOptions): Promise<TextBox[]>;
  preprocessRec(crops: RgbImage[]): Promise<TensorData>;
  /** Takes `logits`' buffer; `charsetFile` is read once by the thread. */
  ctcDecode(logits: TensorData, charsetFile: string): Promise<RecResult[]>;
  close(): Promise<void>;
}

export type OcrStep =
  | { step: 'preprocessDet'; image: RgbImage; options: DetPreprocessOptions }
  | { step: 'decodeDet'; map: TensorData; geometry: DetGeometry; options: DetDecodeOptions }
  | { step: 'preprocessRec'; crops: RgbImage[] }
  | { step: 'ctcDecode'; logits: TensorData; charsetFile: string };

/** A tensor's buffer where the tensor is all of it (a view into a larger buffer is copied instead: the rest may be another's). */
const own = (tensor: TensorData): ArrayBuffer[] => (tensor.data.byteOffset === 0 && tensor.data.byteLength === tensor.data.buffer.byteLength ? [tensor.data.buffer as ArrayBuffer] : []);

export function createOcrSteps(): OcrSteps {
  const thread = createWorkerClient<OcrStep>(import.meta.url, 'worker', 'text reading');
  return {
    // Images are copied: a frame's pixels are shared by every node that reads it.
    preprocessDet: (image, options) => thread.request({ step: 'preprocessDet', image, options }),
    decodeDet: (map, geometry, options) => thread.request({ step: 'decodeDet', map, geometry, options }, own(map)),
    preprocessRec: (crops) => thread.request({ step: 'preprocessRec', crops }),
    ctcDecode: (logits, charsetFile) => thread.request({ step: 'ctcDecode', logits, charsetFile }, own(logits)),
    close: () => thread.close(),
  };
}
