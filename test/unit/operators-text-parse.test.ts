import { describe, expect, it } from 'vitest';
import { createChangeDetector, createTextParser, ocrDigits, parseClock, type ChangeEvent, type FieldPattern, type FieldValue } from '../../apps/operators/index.js';
import { ErrorCode } from '../../core/index.js';

const hud: FieldPattern[] = [
  { field: 'score', pattern: 'SCORE\\s*:?\\s*([\\d,]+)' },
  { field: 'kills', pattern: 'KILLS\\s*:?\\s*(\\d+)' },
  { field: 'alive', pattern: 'ALIVE\\s*(\\d+)' },
  { field: 'clock', pattern: '(\\d{1,2}:\\d{2})', type: 'time' },
  { field: 'player', pattern: 'PLAYER\\s+(\\S+)', type: 'text' },
  { field: 'last', pattern: 'LAST.*?(\\d+)' },
];

describe('createTextParser', () => {
  const parser = createTextParser(hud);
  const read = (line: string, field: string): FieldValue | undefined => parser.parse([line]).find((f) => f.field === field)?.value;

  it.each([
    // line as OCR read it, field, value
    ['SCORE 1234', 'score', 1234],
    ['SCORE: 1,234', 'score', 1234],
    ['SCORE 1O34', 'score', 1034],
    ['SCORE l2B4', 'score', 1284],
    ['SCORE 12S4', 'score', 1254],
    ['SCORE 9o', 'score', 90],
    ['KILLS: 7', 'kills', 7],
    ['KILLS:7', 'kills', 7],
    ['KILLS7', 'kills', 7],
    ['KILLS: |2', 'kills', 12],
    ['KILLS: I0', 'kills', 10],
    ['KILLS: O', 'kills', 0],
    ['KILLS: lO', 'kills', 10],
    ['KILLS: S', 'kills', undefined],
    ['KILLS: -', 'kills', undefined],
    ['ALIVE 42', 'alive', 42],
    ['ALIVE 4o', 'alive', 40],
    ['ALIVE', 'alive', undefined],
    ['12:05', 'clock', 725],
    ['1:05', 'clock', 65],
    ['l:O5', 'clock', 65],
    ['1:5O', 'clock', 110],
    ['12:75', 'clock', undefined],
    ['PLAYER Ghost99', 'player', 'Ghost99'],
    // Look-alikes touching a letter belong to a word: "Bo" of Bonus is not 80.
    ['LAST Bonus 12', 'last', 12],
  ] as const)('%j → %s = %j', (line, field, value) => {
    expect(read(line, field)).toBe(value);
  });

  it('returns the fields in configured order, the first line with a valid value winning', () => {
    const lines = ['ALIVE 42   KILLS 3', { text: 'SCORE 10' }, 'KILLS 9', '0:59'];
    expect(parser.parse(lines)).toEqual([
      { field: 'score', value: 10, text: 'SCORE 10' },
      { field: 'kills', value: 3, text: 'KILLS 3' },
      { field: 'alive', value: 42, text: 'ALIVE 42' },
      { field: 'clock', value: 59, text: '0:59' },
    ]);
  });

  it('falls back to the pattern as written when the lenient reading is not a number', () => {
    // Lenient, the run is "7s" (the i flag lets \d's class take s), which is no number.
    expect(createTextParser([{ field: 'k', pattern: 'kills (\\d+)', flags: 'i' }]).parse(['Kills 7s'])).toEqual([{ field: 'k', value: 7, text: 'Kills 7' }]);
  });

  it.each([
    [{ field: 'x', pattern: '(' }],
    [{ field: 'x', pattern: '\\d', flags: 'g' }],
  ])('rejects %j', (pattern) => {
    expect(() => createTextParser([pattern])).toThrow(expect.objectContaining({ code: ErrorCode.AppInvalid }));
  });
});

describe('ocrDigits', () => {
  it.each([
    ['O', '0'],
    ['o', '0'],
    ['lO', '10'],
    ['I|l', '111'],
    ['B8', '88'],
    ['S', 'S'],
    ['SS', 'SS'],
    ['1S', '15'],
    ['S1', '51'],
    ['1,2S0', '1,250'],
  ])('%s → %s', (run, digits) => {
    expect(ocrDigits(run)).toBe(digits);
  });
});

describe('parseClock', () => {
  it.each([
    ['1:05', 65],
    ['12:05', 725],
    ['0:59', 59],
    ['1:02:03', 3723],
    ['12;05', 725],
    ['1:60', undefined],
    ['1:005', undefined],
    ['105', undefined],
    ['1:2:3:4', undefined],
    ['a:bc', undefined],
  ] as const)('%s → %s', (text, seconds) => {
    expect(parseClock(text)).toBe(seconds);
  });
});

describe('createChangeDetector', () => {
  /** Feeds one field's values at seq 1, 2, ...; returns what each call gave. */
  function feed(values: FieldValue[], confirmFrames?: number): (ChangeEvent | undefined)[] {
    const detector = createChangeDetector(confirmFrames === undefined ? {} : { confirmFrames });
    return values.map((value, i) => detector.update('kills', value, { seq: i + 1, timeMs: (i + 1) * 100 }));
  }
  const change = (previous: FieldValue | null, value: FieldValue, seq: number): ChangeEvent => ({ field: 'kills', previous, value, seq, timeMs: seq * 100 });

  it('reports the first value and each change', () => {
    expect(feed([0, 0, 1, 1, 2])).toEqual([change(null, 0, 1), undefined, change(0, 1, 3), undefined, change(1, 2, 5)]);
  });

  it('with confirmFrames 2 ignores a one-frame misread and dates a change from its first sighting', () => {
    // 8 is a misread; 7 is real, reported when confirmed (call 7) with seq 6.
    expect(feed([5, 5, 8, 5, 5, 7, 7, 7], 2)).toEqual([undefined, change(null, 5, 1), undefined, undefined, undefined, undefined, change(5, 7, 6), undefined]);
  });

  it('with confirmFrames 2 restarts confirmation when the new value is interrupted', () => {
    expect(feed([1, 1, 2, 3, 3], 2)).toEqual([undefined, change(null, 1, 1), undefined, undefined, change(1, 3, 4)]);
  });

  it('ignores an observation whose seq is not after the last one for the field', () => {
    const detector = createChangeDetector();
    detector.update('kills', 3, { seq: 10, timeMs: 1000 });
    expect(detector.update('kills', 4, { seq: 9, timeMs: 900 })).toBeUndefined();
    expect(detector.update('kills', 4, { seq: 10, timeMs: 1000 })).toBeUndefined();
    expect(detector.current('kills')).toBe(3);
    // Fields are independent: seq 9 is new for another field.
    expect(detector.update('alive', 50, { seq: 9, timeMs: 900 })).toEqual({ field: 'alive', previous: null, value: 50, seq: 9, timeMs: 900 });
  });

  it('compares text values too', () => {
    const detector = createChangeDetector();
    detector.update('map', 'ERANGEL', { seq: 1, timeMs: 0 });
    expect(detector.update('map', 'ERANGEL', { seq: 2, timeMs: 0 })).toBeUndefined();
    expect(detector.update('map', 'MIRAMAR', { seq: 3, timeMs: 0 })?.previous).toBe('ERANGEL');
  });

  it.each([0, 1.5, -1])('rejects confirmFrames %s', (confirmFrames) => {
    expect(() => createChangeDetector({ confirmFrames })).toThrow(expect.objectContaining({ code: ErrorCode.AppInvalid }));
  });
});
