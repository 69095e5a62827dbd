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

const whole = (view: ArrayBufferView): boolean => view.buffer instanceof ArrayBuffer && view.byteOffset === 0 && view.byteLength === view.buffer.byteLength;

/** A tensor's buffer where the tensor is all of it (a view into a larger buffer is copied instead: the rest may be another's). */
const own = (tensor: TensorData): ArrayBuffer[] => (whole(tensor.data) ? [tensor.data.buffer as ArrayBuffer] : []);

/**
 * Images are copied: a frame's pixels are shared by every node that reads it. A copy of the
 * pixels alone, moved, since sending a view would copy all of its buffer (a task's pixels are a
 * view into the whole message batch the bus read).
 */
const copies = (images: readonly RgbImage[]): { images: RgbImage[]; transfer: ArrayBuffer[] } => {
  // Not `data.slice()`: on a Node Buffer that is a view of the same memory, which would move away.
  const copied = images.map((image) => ({ ...image, data: new Uint8Array(image.data) }));
  return { images: copied, transfer: copied.map((image) => image.data.buffer as ArrayBuffer) };
};

/** `model` names the text model in errors. */
export function createOcrSteps(model: string): OcrSteps {
  const thread = createWorkerClient<OcrStep>(import.meta.url, 'worker', `${model}'s text reading`);
  return {
    preprocessDet: (image, options) => {
      const { images, transfer } = copies([image]);
      return thread.request({ step: 'preprocessDet', image: images[0]!, options }, transfer);
    },
    decodeDet: (map, geometry, options) => thread.request({ step: 'decodeDet', map, geometry, options }, own(map)),
    preprocessRec: (crops) => {
      const { images, transfer } = copies(crops);
      return thread.request({ step: 'preprocessRec', crops: images }, transfer);
    },
    ctcDecode: (logits, charsetFile) => thread.request({ step: 'ctcDecode', logits, charsetFile }, own(logits)),
    close: () => thread.close(),
  };
}
