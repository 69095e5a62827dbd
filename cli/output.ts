/** Formats query results for people (table) and programs (json, csv). */

export type OutputFormat = 'table' | 'json' | 'csv';

export interface Table {
  columns: { name: string }[];
  rows: Record<string, unknown>[];
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

const tableCell = (value: unknown): string => visible(cell(value));

/**
 * Stored text can come from the footage (a plate or a HUD read by OCR, a stream's title), so
 * what is printed for a person shows control characters as escapes: a terminal would act on
 * them (an escape sequence can clear or rewrite the screen). So are the invisible characters
 * that reorder or hide text (bidirectional overrides, zero-width characters, line separators).
 */
const visible = (text: string): string => text.replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** As ClickHouse writes numbers: infinities and NaN too. */
const PLAIN_NUMBER = /^[-+]?((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|inf|infinity|nan)$/i;

/**
 * A spreadsheet runs a cell that starts with = + - or @ (or a tab or carriage return) as a
 * formula; such text gets a leading ' (OWASP's advice on CSV injection), numbers stay as they are.
 */
function csvCell(value: unknown): string {
  const raw = cell(value);
  const text = /^[=+\-@\t\r]/.test(raw) && !PLAIN_NUMBER.test(raw) ? `'${raw}` : raw;
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function formatTable(result: Table, format: OutputFormat): string {
  const names = result.columns.map((c) => c.name);
  if (format === 'json') return JSON.stringify(result.rows);
  if (format === 'csv') {
    return [names.map(csvCell).join(','), ...result.rows.map((r) => names.map((n) => csvCell(r[n])).join(','))].join('\n');
  }
  const widths = names.map((n) => Math.max(visible(n).length, ...result.rows.map((r) => tableCell(r[n]).length)));
  const line = (values: string[]): string => values.map((v, i) => v.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [
    line(names.map(visible)),
    line(widths.map((w) => '-'.repeat(w))),
    ...result.rows.map((r) => line(names.map((n) => tableCell(r[n])))),
    `(${result.rows.length} row${result.rows.length === 1 ? '' : 's'})`,
  ].join('\n');
}
