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

function csvCell(value: unknown): string {
  const text = cell(value);
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function formatTable(result: Table, format: OutputFormat): string {
  const names = result.columns.map((c) => c.name);
  if (format === 'json') return JSON.stringify(result.rows);
  if (format === 'csv') {
    return [names.map(csvCell).join(','), ...result.rows.map((r) => names.map((n) => csvCell(r[n])).join(','))].join('\n');
  }
  const widths = names.map((n) => Math.max(n.length, ...result.rows.map((r) => cell(r[n]).length)));
  const line = (values: string[]): string => values.map((v, i) => v.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [
    line(names),
    line(widths.map((w) => '-'.repeat(w))),
    ...result.rows.map((r) => line(names.map((n) => cell(r[n])))),
    `(${result.rows.length} row${result.rows.length === 1 ? '' : 's'})`,
  ].join('\n');
}
