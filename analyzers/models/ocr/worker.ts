import { readFileSync } from 'node:fs';
import { serveRequests } from '../../../core/index.js';
import { loadCharset } from './charset.js';
import { decodeDet, preprocessDet } from './det.js';
import { ctcDecode, preprocessRec } from './rec.js';
import type { OcrStep } from './steps.js';

/** The thread of `createOcrSteps`. */
const charsets = new Map<string, string[]>();
const charsetOf = (file: string): string[] => {
  let charset = charsets.get(file);
  if (!charset) charsets.set(file, (charset = loadCharset(readFileSync(file, 'utf8'))));
  return charset;
};

serveRequests<OcrStep>((request) => {
  switch (request.step) {
    case 'preprocessDet': {
      const prepared = preprocessDet(request.image, request.options);
      return { result: prepared, transfer: [prepared.input.data.buffer as ArrayBuffer] };
    }
    case 'decodeDet':
      return { result: decodeDet(request.map, request.geometry, request.options) };
    case 'preprocessRec': {
      const input = preprocessRec(request.crops);
      return { result: input, transfer: [input.data.buffer as ArrayBuffer] };
    }
    case 'ctcDecode':
      return { result: ctcDecode(request.logits, charsetOf(request.charsetFile)) };
  }
});
