import { invalidConfig } from './errors.js';
import { STREAM_RESTART_GAP } from './track.js';

/** `number`: "1,234" → 1234; `time`: "m:ss" or "h:mm:ss" → seconds; `text`: the text as read. */
export type FieldType = 'number' | 'time' | 'text';

export type FieldValue = number | string;

export interface FieldPattern {
  field: string;
  /**
   * A regular expression (JavaScript syntax). The first capture group holds the value, or the
   * whole match when there is none. Write digits as `\d`: for `number` and `time` fields each `\d`
   * also accepts the letters OCR mistakes for digits (see `ocrDigits`).
   */
  pattern: string;
  /** Default `number`. */
  type?: FieldType;
  /**
   * Regular-expression flags, default none. With `i` the digit class also takes `i`, `L`, `s`
   * and `b`, which are not read as digits: such a reading falls back to plain `\d`.
   */
  flags?: string;
}

export interface ParsedField {
  field: string;
  value: FieldValue;
  /** What the pattern matched, as read. */
  text: string;
}

export interface TextParser {
  /** The fields found in one frame's text lines, in the order they are configured; the first line that gives a field a valid value wins. */
  parse(lines: readonly (string | { text: string })[]): ParsedField[];
}

/** Letters OCR confuses with digits, and the digit each stands for. */
const DIGIT_FOR: Readonly<Record<string, string>> = { O: '0', o: '0', I: '1', l: '1', '|': '1', S: '5', B: '8' };
const LOOKALIKES = 'OoIl|SB';

/**
 * Reads look-alike letters in a run of digits as the digits they resemble: O and o as 0, I, l
 * and | as 1, B as 8, and S as 5 only where the run also holds a real digit, since a lone S is
 * far more often a letter than a 5.
 */
export function ocrDigits(run: string): string {
  const hasDigit = /\d/.test(run);
  return run.replace(/[OoIl|SB]/g, (c) => (c === 'S' && !hasDigit ? c : (DIGIT_FOR[c] ?? c)));
}

/** "1:05" → 65, "1:02:03" → 3723; `undefined` unless every part after the first is a valid 0–59. */
export function parseClock(text: string): number | undefined {
  const parts = text.trim().split(/[:;.]/);
  if (parts.length < 2 || parts.length > 3 || !parts.every((p) => /^\d+$/.test(p))) return undefined;
  const values = parts.map(Number);
  if (values.slice(1).some((v, i) => v > 59 || (parts[i + 1] as string).length > 2)) return undefined;
  return values.reduce((total, v) => total * 60 + v, 0);
}

function parseNumber(text: string): number | undefined {
  // Thousands separators and the gaps OCR leaves inside a number.
  const plain = text.trim().replace(/(?<=\d)[,\s'](?=\d)/g, '');
  return /^-?\d+(\.\d+)?$/.test(plain) ? Number(plain) : undefined;
}

/** The pattern with every `\d` widened to take the look-alike letters too. */
function widenDigits(source: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i] as string;
    if (c === '\\') {
      const next = source[i + 1] ?? '';
      out += next === 'd' ? (inClass ? `\\d${LOOKALIKES}` : `[\\d${LOOKALIKES}]`) : c + next;
      i++;
    } else {
      if (c === '[') inClass = true;
      else if (c === ']') inClass = false;
      out += c;
    }
  }
  return out;
}

function valueOf(type: FieldType, token: string): FieldValue | undefined {
  if (type === 'text') return token.trim() || undefined;
  return type === 'time' ? parseClock(token) : parseNumber(token);
}

/**
 * The value token of a match, look-alikes read as digits where the pattern was widened. A run of
 * look-alikes alone ("O", "lO") stands for digits only when no letter touches it: the "B" or
 * "I" of a word is not a digit.
 */
function tokenOf(m: RegExpMatchArray, lenient: boolean): string {
  const group = m[1] === undefined ? 0 : 1;
  const token = m[group] ?? '';
  if (!lenient) return token;
  if (/\d/.test(token)) return ocrDigits(token);
  const [start, end] = m.indices?.[group] ?? [0, 0];
  const input = m.input ?? '';
  const letter = (c: string | undefined): boolean => c !== undefined && /\p{L}/u.test(c);
  return letter(input[start - 1]) || letter(input[end]) ? token : ocrDigits(token);
}

/**
 * Reads configured fields from recognized text (a game HUD's "KILLS: 7", "12:05"). Each pattern
 * is tried leniently first (look-alike letters read as digits) and, where no lenient match
 * gives a valid value, as written.
 */
export function createTextParser(patterns: readonly FieldPattern[]): TextParser {
  const compiled = patterns.map(({ field, pattern, type = 'number', flags = '' }) => {
    if (/[gyd]/.test(flags)) throw invalidConfig('text parse', `field ${field}: flags g, y and d are set by the parser`, { field, flags });
    try {
      const plain = new RegExp(pattern, `${flags}g`);
      const lenient = new RegExp(widenDigits(pattern), `${flags}dg`);
      const tries: [RegExp, boolean][] = type === 'text' ? [[plain, false]] : [[lenient, true], [plain, false]];
      return { field, type, tries };
    } catch (err) {
      throw invalidConfig('text parse', `field ${field}: invalid pattern ${pattern}`, { field, pattern, cause: String(err) });
    }
  });

  return {
    parse(lines) {
      const texts = lines.map((l) => (typeof l === 'string' ? l : l.text));
      const found: ParsedField[] = [];
      for (const { field, type, tries } of compiled) {
        search: for (const text of texts) {
          for (const [re, lenient] of tries) {
            for (const m of text.matchAll(re)) {
              const value = valueOf(type, tokenOf(m, lenient));
              if (value === undefined) continue;
              found.push({ field, value, text: m[0] });
              break search;
            }
          }
        }
      }
      return found;
    },
  };
}

export interface ChangeEvent {
  field: string;
  /** The value accepted before; `null` for a field's first value. */
  previous: FieldValue | null;
  value: FieldValue;
  /** The frame the new value was first seen in. */
  seq: number;
  timeMs: number;
}

export interface ChangeDetectorOptions {
  /**
   * Consecutive observations of a field that must agree on a new value before it is accepted.
   * Default 1; 2 or 3 ignore one-frame OCR misreads at the cost of that many frames' delay.
   */
  confirmFrames?: number;
}

export interface ChangeDetector {
  /** An event when `value` becomes the field's accepted value (including its first), else `undefined`. */
  update(field: string, value: FieldValue, at: { seq: number; timeMs: number }): ChangeEvent | undefined;
  /** The field's accepted value. */
  current(field: string): FieldValue | undefined;
}

interface FieldState {
  accepted?: { value: FieldValue };
  pending?: { value: FieldValue; count: number; seq: number; timeMs: number };
  lastSeq: number;
}

/**
 * Per-stream change detection over parsed fields. "Consecutive" means consecutive calls for the
 * field: a frame where it was not read neither confirms nor breaks a pending value. An
 * observation whose seq is not after the field's last one (a late or redelivered frame) is
 * ignored, like the tracker does, so replays give the same events.
 */
export function createChangeDetector(options: ChangeDetectorOptions = {}): ChangeDetector {
  const { confirmFrames = 1 } = options;
  if (!(Number.isInteger(confirmFrames) && confirmFrames >= 1)) {
    throw invalidConfig('change detector', 'confirmFrames must be a whole number ≥ 1', { confirmFrames });
  }
  const fields = new Map<string, FieldState>();

  return {
    update(field, value, { seq, timeMs }) {
      let state = fields.get(field);
      const restarted = state !== undefined && seq + STREAM_RESTART_GAP < state.lastSeq;
      if (state && seq <= state.lastSeq && !restarted) return undefined;
      if (!state || restarted) fields.set(field, (state = { lastSeq: seq }));
      state.lastSeq = seq;

      if (state.accepted && Object.is(state.accepted.value, value)) {
        state.pending = undefined;
        return undefined;
      }
      if (state.pending && Object.is(state.pending.value, value)) state.pending.count += 1;
      else state.pending = { value, count: 1, seq, timeMs };
      if (state.pending.count < confirmFrames) return undefined;

      const event: ChangeEvent = { field, previous: state.accepted?.value ?? null, value, seq: state.pending.seq, timeMs: state.pending.timeMs };
      state.accepted = { value };
      state.pending = undefined;
      return event;
    },
    current(field) {
      return fields.get(field)?.accepted?.value;
    },
  };
}
