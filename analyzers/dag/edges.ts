import { ErrorCode, PanoptesError, type Box, type Detection, type EdgeFilter, type FrameRef, type NodeOutput } from '../../core/index.js';
import type { RgbImage } from '../image/index.js';
import { cropImage } from '../models/index.js';

/** Does a parent's detection flow along an edge? Regions are fractions of the frame. */
export function passesFilter(detection: Detection, filter: EdgeFilter, frame: Pick<FrameRef, 'width' | 'height'>): boolean {
  if (filter.classes && !filter.classes.includes(detection.className)) return false;
  if (filter.minScore !== undefined && detection.score < filter.minScore) return false;
  if (filter.region) {
    const cx = (detection.box.x1 + detection.box.x2) / 2 / frame.width;
    const cy = (detection.box.y1 + detection.box.y2) / 2 / frame.height;
    const r = filter.region;
    if (cx < r.x1 || cx > r.x2 || cy < r.y1 || cy > r.y2) return false;
  }
  return true;
}

/** A box grown by `padding` × its size on each side, in whole pixels, clipped to `bounds`. */
export function cropRegion(box: Box, padding: number, bounds: Box): Box {
  const padX = (box.x2 - box.x1) * padding;
  const padY = (box.y2 - box.y1) * padding;
  return {
    x1: Math.max(bounds.x1, Math.floor(box.x1 - padX)),
    y1: Math.max(bounds.y1, Math.floor(box.y1 - padY)),
    x2: Math.min(bounds.x2, Math.ceil(box.x2 + padX)),
    y2: Math.min(bounds.y2, Math.ceil(box.y2 + padY)),
  };
}

export function shiftBox(box: Box, dx: number, dy: number): Box {
  return { x1: box.x1 + dx, y1: box.y1 + dy, x2: box.x2 + dx, y2: box.y2 + dy };
}

/** An output's boxes moved by `offset`, from a crop's pixels into the frame's. */
export function shiftOutput(output: NodeOutput, offset: { x: number; y: number }): NodeOutput {
  switch (output.kind) {
    case 'detections':
      return { kind: 'detections', detections: output.detections.map((d) => ({ ...d, box: shiftBox(d.box, offset.x, offset.y) })) };
    case 'texts':
      return { kind: 'texts', texts: output.texts.map((t) => ({ ...t, box: shiftBox(t.box, offset.x, offset.y) })) };
    case 'attributes':
      return output;
  }
}

/** A task's raw pixels, checked against the size it says. */
export function rawImage({ width, height }: { width: number; height: number }, data: Uint8Array): RgbImage {
  if (data.length !== width * height * 3) {
    throw new PanoptesError(ErrorCode.ImageDecode, `a ${width}x${height} RGB crop needs ${width * height * 3} bytes, got ${data.length}`);
  }
  return { width, height, data };
}

/** The part of an input image a node's region (fractions of it) names, and where it lies in the frame. */
export function regionOf(image: RgbImage, offset: { x: number; y: number }, region: Box): { image: RgbImage; offset: { x: number; y: number } } {
  const box = { x1: Math.floor(region.x1 * image.width), y1: Math.floor(region.y1 * image.height), x2: Math.ceil(region.x2 * image.width), y2: Math.ceil(region.y2 * image.height) };
  return { image: cropImage(image, box), offset: { x: offset.x + box.x1, y: offset.y + box.y1 } };
}
