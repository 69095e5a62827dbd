import sharp from 'sharp';
import { isJpeg, type ImageInput } from './jpeg.js';

/** A box to draw, in the image's pixels, and its label. */
export interface LabelledBox {
  label: string;
  box: { x1: number; y1: number; x2: number; y2: number };
}

/** Box colours, one per label's first word (its class), in an order that keeps neighbours apart. */
const COLOURS = ['#ffd60a', '#4cc9f0', '#f72585', '#80ed99', '#ff8500', '#b5179e', '#00f5d4', '#e9ecef'];

/**
 * The frame as a JPEG with each object's box and label drawn on it, by libvips (an SVG overlay
 * composited in native code, off the event loop).
 */
export async function annotatedJpeg(frame: Uint8Array | ImageInput, objects: readonly LabelledBox[]): Promise<Buffer> {
  const image =
    frame instanceof Uint8Array ? sharp(frame) : isJpeg(frame) ? sharp(frame.jpeg) : sharp(frame.data, { raw: { width: frame.width, height: frame.height, channels: 3 } });
  const { width = 0, height = 0 } = await image.metadata();
  if (objects.length === 0 || width === 0 || height === 0) return image.jpeg({ quality: 85 }).toBuffer();
  const stroke = Math.max(2, Math.round(Math.min(width, height) / 240));
  const fontSize = Math.max(12, Math.round(Math.min(width, height) / 32));
  const classes = [...new Set(objects.map((o) => o.label.split(' ')[0]))];
  const shapes = objects.map(({ label: given, box }) => {
    const label = plainLabel(given);
    const colour = COLOURS[classes.indexOf(label.split(' ')[0]) % COLOURS.length]!;
    const x = clamp(box.x1, 0, width);
    const y = clamp(box.y1, 0, height);
    const w = clamp(box.x2, 0, width) - x;
    const h = clamp(box.y2, 0, height) - y;
    // The label sits above the box (inside it at the top edge of the picture), within the picture.
    const labelY = y >= fontSize + 4 ? y - fontSize - 4 : y;
    const labelWidth = Math.round(label.length * fontSize * 0.6) + 8;
    const labelX = Math.max(0, Math.min(x, width - labelWidth));
    return [
      `<rect x="${x}" y="${y}" width="${w}" height="${h}" fill="none" stroke="${colour}" stroke-width="${stroke}"/>`,
      `<rect x="${labelX}" y="${labelY}" width="${labelWidth}" height="${fontSize + 4}" fill="${colour}"/>`,
      `<text x="${labelX + 4}" y="${labelY + fontSize}" font-family="DejaVu Sans, sans-serif" font-size="${fontSize}" fill="#000">${escapeXml(label)}</text>`,
    ].join('');
  });
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">${shapes.join('')}</svg>`;
  return image.composite([{ input: Buffer.from(svg), top: 0, left: 0 }]).jpeg({ quality: 85 }).toBuffer();
}

const clamp = (value: number, low: number, high: number): number => Math.round(Math.min(high, Math.max(low, value)));

/** Labels longer than this are cut: they come from models and configs, and a picture has room for a few words. */
const MAX_LABEL = 80;

/** A label as one line of text XML can carry: no control characters, at most `MAX_LABEL` long. */
function plainLabel(label: string): string {
  // What XML 1.0 forbids; with the u flag, a surrogate alone (a pair is one character).
  const text = label.replace(/[\u0000-\u001f\u007f\ufffe\uffff\ud800-\udfff]/gu, ' ');
  return text.length > MAX_LABEL ? `${text.slice(0, MAX_LABEL - 1)}…` : text;
}

/** Labels come from models and users' configs: as text, never as markup. */
function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
