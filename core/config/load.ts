import { closeSync, openSync, readFileSync, readSync, statSync, type Stats } from 'node:fs';
import type { z } from 'zod';
import { isAlias, isPair, isScalar, isSeq, LineCounter, parseDocument, visit, type Document } from 'yaml';
import { describeError, ErrorCode, PanoptesError } from '../errors.js';

/**
 * YAML → zod → frozen value. Every problem is reported at once, each naming the file and line,
 * the key path, the value found and what was expected, so a user fixes a file in one pass.
 */

export interface ConfigIssue {
  file: string;
  line?: number;
  /** Dotted key path, e.g. `sources[0].fps`. */
  path: string;
  message: string;
}

export function configError(file: string, issues: ConfigIssue[], code: ErrorCode = ErrorCode.ConfigInvalid): PanoptesError {
  issues = withLines(issues);
  const lines = issues.map((i) => `  ${file}${i.line ? `:${i.line}` : ''}: ${i.path || '(top level)'}: ${i.message}`);
  return new PanoptesError(
    code,
    `${file} is not a valid configuration (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n${lines.join('\n')}`,
    { details: { file, issues } },
  );
}

/** Finds the line of issues found after parsing (cross-references), from their file and key path. */
function withLines(issues: ConfigIssue[]): ConfigIssue[] {
  const docs = new Map<string, { doc: Document; lineCounter: LineCounter } | undefined>();
  return issues.map((issue) => {
    if (issue.line !== undefined || !issue.path) return issue;
    if (!docs.has(issue.file)) {
      try {
        // A pipe was read once already: opened again it could wait for a writer for ever.
        if (!statSync(issue.file).isFile()) throw new Error('not a regular file');
        const lineCounter = new LineCounter();
        docs.set(issue.file, { doc: parseDocument(readFileSync(issue.file, 'utf8'), { lineCounter }), lineCounter });
      } catch {
        docs.set(issue.file, undefined);
      }
    }
    const parsed = docs.get(issue.file);
    if (!parsed) return issue;
    const path = issue.path.split(/\.|\[(\d+)\]/).filter((p) => p).map((p) => (/^\d+$/.test(p) ? Number(p) : p));
    const offset = nearestRange(parsed.doc, path);
    return offset === undefined ? issue : { ...issue, line: parsed.lineCounter.linePos(offset).line };
  });
}

/** Far more than any configuration file needs; a file larger is a mistake (or /dev/zero), not read. */
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

export function readConfigText(file: string): string {
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch (err) {
    throw new PanoptesError(ErrorCode.ConfigNotFound, `cannot read configuration file ${file}`, { cause: err, details: { file } });
  }
  // A device would be read for ever, a folder not at all; a pipe (`<(envsubst < x.yaml)`) is read up to the limit.
  if (!stats.isFile() && !stats.isFIFO()) throw new PanoptesError(ErrorCode.ConfigNotFound, `cannot read configuration file ${file}: it is ${stats.isDirectory() ? 'a folder' : 'not a regular file'}`, { details: { file } });
  const tooLarge = (): PanoptesError => new PanoptesError(ErrorCode.ConfigInvalid, `configuration file ${file} is over ${MAX_CONFIG_BYTES} bytes; no more are read`, { details: { file } });
  if (stats.size > MAX_CONFIG_BYTES) throw tooLarge();
  let text: Buffer;
  try {
    text = stats.isFile() ? readFileSync(file) : readPipe(file, MAX_CONFIG_BYTES + 1);
  } catch (err) {
    throw new PanoptesError(ErrorCode.ConfigNotFound, `cannot read configuration file ${file}`, { cause: err, details: { file } });
  }
  if (text.length > MAX_CONFIG_BYTES) throw tooLarge();
  return text.toString('utf8');
}

/** A pipe's bytes up to `limit` (its size is not known ahead). */
function readPipe(file: string, limit: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.allocUnsafe(limit);
    let length = 0;
    for (let n = -1; n !== 0 && length < limit; length += n) n = readSync(fd, buffer, length, limit - length, null);
    return buffer.subarray(0, length);
  } finally {
    closeSync(fd);
  }
}

/** Parses YAML text and validates it; `file` names the source in error messages. */
export function parseConfig<S extends z.ZodType>(schema: S, text: string, file: string): Readonly<z.infer<S>> {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw configError(
      file,
      doc.errors.map((e) => ({
        file,
        line: lineCounter.linePos(e.pos[0]).line,
        path: '',
        message: `YAML syntax: ${e.message.split('\n')[0] ?? e.code}`,
      })),
    );
  }
  // A list or a map as a key would be stringified by toJS (with a Node warning): no config has such keys.
  const oddKeys: ConfigIssue[] = [];
  visit(doc, {
    Pair(_, pair, ancestors) {
      const key = pair.key as { range?: [number, number, number] } | null;
      if (key === null || isScalar(key) || (isAlias(key) && isScalar(key.resolve(doc)))) return;
      oddKeys.push({ file, line: lineCounter.linePos(key.range?.[0] ?? 0).line, path: formatPath(keyPath(ancestors)), message: 'a key must be a plain name, not a list or a map' });
    },
  });
  if (oddKeys.length > 0) throw configError(file, oddKeys);
  let value: unknown;
  try {
    // Aliases are expanded with a cap: a "billion laughs" file is refused, not expanded.
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw configError(file, [{ file, path: '', message: `YAML: ${describeError(err)}` }]);
  }
  const result = schema.safeParse(value, { reportInput: true });
  if (!result.success) {
    throw configError(
      file,
      result.error.issues.map((issue) => describeIssue(issue, schema, doc, lineCounter, file)),
    );
  }
  return deepFreeze(result.data);
}

export function loadConfigFile<S extends z.ZodType>(schema: S, file: string): Readonly<z.infer<S>> {
  return parseConfig(schema, readConfigText(file), file);
}

function describeIssue(
  issue: z.core.$ZodIssue,
  schema: z.ZodType,
  doc: Document,
  lineCounter: LineCounter,
  file: string,
): ConfigIssue {
  const { at, message } = issueAt(issue, schema);
  const offset = nearestRange(doc, at);
  return {
    file,
    ...(offset === undefined ? {} : { line: lineCounter.linePos(offset).line }),
    path: formatPath(at),
    message,
  };
}

/** Where a zod issue is, within the value the schema checked, and what is wrong there. */
function issueAt(issue: z.core.$ZodIssue, schema: z.ZodType): { at: (string | number)[]; message: string } {
  const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
  if (issue.code === 'unrecognized_keys') {
    const allowed = objectKeysAt(schema, path);
    return {
      at: [...path, issue.keys[0] ?? ''],
      message: `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}` + (allowed ? `; expected one of: ${allowed.join(', ')}` : ''),
    };
  }
  const got = 'input' in issue && issue.input !== undefined ? `got ${preview(issue.input)}` : 'missing';
  return { at: path, message: `${got}; expected ${expectation(issue)}` };
}

/**
 * A part of a configuration file checked against a schema of its own (a node's params against
 * its model's): each problem at its key path under `prefix`, worded as the file's own problems.
 * The line is found from the path when the issues are thrown (`configError`).
 */
export function checkAgainst(schema: z.ZodType, value: unknown, file: string, prefix: readonly (string | number)[]): { issues: ConfigIssue[]; parsed?: unknown } {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return { issues: [], parsed: result.data };
  return {
    issues: result.error.issues.map((issue) => {
      const { at, message } = issueAt(issue, schema);
      return { file, path: formatPath([...prefix, ...at]), message };
    }),
  };
}

function expectation(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.expected === 'number' && typeof issue.input === 'number' ? 'a finite number' : issue.expected;
    case 'invalid_value':
      return issue.values.length === 1 ? JSON.stringify(issue.values[0]) : `one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'too_small':
      return `${issue.origin === 'array' ? 'at least' : issue.inclusive ? '≥' : '>'} ${String(issue.minimum)}${issue.origin === 'array' ? ' items' : ''}`;
    case 'too_big':
      return `${issue.origin === 'array' ? 'at most' : issue.inclusive ? '≤' : '<'} ${String(issue.maximum)}${issue.origin === 'array' ? ' items' : ''}`;
    case 'invalid_format':
      if (issue.format === 'datetime') return 'an ISO 8601 date and time, e.g. 2026-05-01T08:00:00Z';
      return issue.pattern ? `${issue.message} (${issue.pattern})` : issue.format;
    case 'invalid_union':
      // Each form the key allows, by what it lacked.
      if (issue.errors.length > 0) return issue.errors.map((form) => form.map((i) => `${i.path.length > 0 ? `${formatPath(i.path.filter((p): p is string | number => typeof p !== 'symbol'))}: ` : ''}${expectation(i)}`).join(', ')).join('; or ');
      return issue.message;
    default:
      return issue.message;
  }
}

function preview(value: unknown): string {
  // JSON has no NaN or Infinity: it would say null.
  const text = typeof value === 'number' && !Number.isFinite(value) ? String(value) : (JSON.stringify(value) ?? String(value));
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** The key path of a node from its ancestors (as the visitor gives them, the document first). */
function keyPath(ancestors: readonly unknown[]): (string | number)[] {
  return ancestors.flatMap((node, i): (string | number)[] => {
    if (isPair(node) && isScalar(node.key)) return [String(node.key.value)];
    if (isSeq(node)) return [node.items.indexOf(ancestors[i + 1] as never)];
    return [];
  });
}

function formatPath(path: readonly (string | number)[]): string {
  return path.reduce<string>((out, p) => (typeof p === 'number' ? `${out}[${p}]` : out ? `${out}.${p}` : p), '');
}

/** The node at the path, or the closest ancestor that exists: a missing key is reported at its parent. */
function nearestRange(doc: Document, path: readonly (string | number)[]): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    if (node?.range) return node.range[0];
  }
  return undefined;
}

/** The keys an object schema accepts at a path, to tell the user what they might have meant. */
function objectKeysAt(schema: z.ZodType, path: readonly (string | number)[]): string[] | undefined {
  let current: z.core.$ZodType | undefined = schema;
  for (let i = 0; current && i <= path.length; ) {
    const def: z.core.$ZodTypeDef & Record<string, unknown> = current._zod.def as never;
    if (def.type === 'optional' || def.type === 'default' || def.type === 'nullable' || def.type === 'prefault') {
      current = def.innerType as z.core.$ZodType;
      continue;
    }
    if (def.type === 'pipe') {
      current = def.in as z.core.$ZodType;
      continue;
    }
    if (i === path.length) {
      return def.type === 'object' ? Object.keys(def.shape as object) : undefined;
    }
    const step = path[i++];
    if (def.type === 'object') current = (def.shape as Record<string, z.core.$ZodType>)[String(step)];
    else if (def.type === 'array') current = def.element as z.core.$ZodType;
    else if (def.type === 'record') current = def.valueType as z.core.$ZodType;
    else return undefined;
  }
  return undefined;
}

export function deepFreeze<T>(value: T): Readonly<T> {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
