import { describe, expect, it } from 'vitest';
import { formatTable } from '../../cli/output.js';

const result = {
  columns: [{ name: 'class' }, { name: 'n' }, { name: 'note' }],
  rows: [
    { class: 'car', n: 12, note: 'plain' },
    { class: 'person', n: 3, note: 'has, a comma' },
    { class: 'bus', n: 100, note: 'says "hi"' },
    { class: 'truck', n: 0, note: 'two\nlines' },
  ],
};

/** An RFC 4180 reader, to check that what formatTable writes reads back as the same cells. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      record.push(field);
      field = '';
    } else if (c === '\n') {
      record.push(field);
      records.push(record);
      record = [];
      field = '';
    } else field += c;
  }
  record.push(field);
  records.push(record);
  return records;
}

describe('formatTable', () => {
  describe('json', () => {
    it('is one JSON array of row objects', () => {
      const text = formatTable(result, 'json');
      const parsed = JSON.parse(text) as unknown;
      expect(Array.isArray(parsed)).toBe(true);
      expect(parsed).toEqual(result.rows);
      expect(text.trim().startsWith('[')).toBe(true);
    });

    it('keeps numbers, nulls and nested values typed', () => {
      const parsed = JSON.parse(formatTable({ columns: [{ name: 'a' }, { name: 'b' }], rows: [{ a: 1.5, b: null }, { a: { x: [1, 2] }, b: true }] }, 'json')) as unknown;
      expect(parsed).toEqual([
        { a: 1.5, b: null },
        { a: { x: [1, 2] }, b: true },
      ]);
    });

    it('is an empty array for no rows', () => {
      expect(JSON.parse(formatTable({ columns: [{ name: 'a' }], rows: [] }, 'json'))).toEqual([]);
    });
  });

  describe('csv', () => {
    it('writes a header and one line per row, in column order', () => {
      const text = formatTable({ columns: [{ name: 'n' }, { name: 'class' }], rows: [{ class: 'car', n: 2 }, { class: 'bus', n: 1 }] }, 'csv');
      expect(text.split('\n')).toEqual(['n,class', '2,car', '1,bus']);
    });

    it('quotes commas, quotes and newlines, doubling quotes', () => {
      const text = formatTable(result, 'csv');
      expect(text).toContain('"has, a comma"');
      expect(text).toContain('"says ""hi"""');
      expect(text).toContain('"two\nlines"');
      expect(text).toContain('car,12,plain');
      expect(parseCsv(text)).toEqual([
        ['class', 'n', 'note'],
        ['car', '12', 'plain'],
        ['person', '3', 'has, a comma'],
        ['bus', '100', 'says "hi"'],
        ['truck', '0', 'two\nlines'],
      ]);
    });

    it('quotes a carriage return and header names that need it', () => {
      const text = formatTable({ columns: [{ name: 'a,b' }], rows: [{ 'a,b': 'x\r\ny' }] }, 'csv');
      expect(text).toBe('"a,b"\n"x\r\ny"');
    });

    it('HOSTILE: keeps a spreadsheet from running stored text as a formula, and numbers as they are', () => {
      const cells = ['=HYPERLINK("http://x","y")', '@SUM(A1)', '+1+cmd', '-2+3', '\t=1', '-2', -3.5, '+4e2', '.5', 'a=b', '-inf', 'nan'];
      const text = formatTable({ columns: [{ name: 'text' }], rows: cells.map((c) => ({ text: c })) }, 'csv');
      expect(parseCsv(text).slice(1).map(([c]) => c)).toEqual(["'=HYPERLINK(\"http://x\",\"y\")", "'@SUM(A1)", "'+1+cmd", "'-2+3", "'\t=1", '-2', '-3.5', '+4e2', '.5', 'a=b', '-inf', 'nan']);
    });

    it('writes empty cells for null and missing values and JSON for objects', () => {
      const text = formatTable({ columns: [{ name: 'a' }, { name: 'b' }, { name: 'c' }], rows: [{ a: null, c: { k: 'v' } }] }, 'csv');
      expect(parseCsv(text)).toEqual([
        ['a', 'b', 'c'],
        ['', '', '{"k":"v"}'],
      ]);
    });
  });

  describe('table', () => {
    it('aligns columns under their headers and ends with the row count', () => {
      const lines = formatTable(
        {
          columns: [{ name: 'class' }, { name: 'n' }, { name: 'share' }],
          rows: [
            { class: 'car', n: 12, share: 0.5 },
            { class: 'motorcycle', n: 3, share: 0.125 },
          ],
        },
        'table',
      ).split('\n');
      expect(lines).toEqual([
        'class       n   share',
        '----------  --  -----',
        'car         12  0.5',
        'motorcycle  3   0.125',
        '(2 rows)',
      ]);
    });

    it('starts every column at the same offset on every line', () => {
      const lines = formatTable(result, 'table').split('\n');
      const header = lines[0] ?? '';
      const offsets = ['class', 'n', 'note'].map((name) => header.indexOf(name));
      const dashes = lines[1] ?? '';
      for (const offset of offsets.slice(1)) {
        expect(dashes[offset - 1]).toBe(' ');
        expect(dashes[offset]).toBe('-');
      }
      expect(lines.at(-1)).toBe('(4 rows)');
      for (const line of lines) expect(line).toBe(line.trimEnd());
    });

    it('HOSTILE: shows control characters as escapes, so stored text cannot drive the terminal', () => {
      const shown = '\\u001b[2Jgone\\u000aline\\u202eABC';
      expect(formatTable({ columns: [{ name: 'text' }], rows: [{ text: '\u001b[2Jgone\nline\u202eABC' }] }, 'table').split('\n')).toEqual(['text', '-'.repeat(shown.length), shown, '(1 row)']);
    });

    it('says "1 row" and "0 rows"', () => {
      const one = formatTable({ columns: [{ name: 'x' }], rows: [{ x: 1 }] }, 'table').split('\n');
      expect(one).toEqual(['x', '-', '1', '(1 row)']);
      const none = formatTable({ columns: [{ name: 'count' }], rows: [] }, 'table').split('\n');
      expect(none).toEqual(['count', '-----', '(0 rows)']);
    });

    it('shows null as empty and objects as JSON', () => {
      const lines = formatTable({ columns: [{ name: 'a' }, { name: 'b' }], rows: [{ a: null, b: { k: 1 } }] }, 'table').split('\n');
      expect(lines).toEqual(['a  b', '-  -------', '   {"k":1}', '(1 row)']);
    });
  });
});
