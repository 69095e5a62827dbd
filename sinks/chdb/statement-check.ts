/**
 * What a user's statement may do on the embedded results, judged on ClickHouse's own parse of
 * it (`EXPLAIN AST`), not on its text. chDB runs ClickHouse in its "local" mode, where
 * `readonly=1` stops writes, settings and the file/url/remote table functions but not everything
 * a server would: the scalar `file()` reads any path there, and `INTO OUTFILE` writes one. So a
 * statement must be a read of the results database: one of the statement kinds below, no output
 * file, no function that reaches the filesystem or other databases, and no table elsewhere.
 */

/** One line of an `EXPLAIN AST` dump: `Function file (children 1)` at depth 4. */
export interface AstNode {
  depth: number;
  /** `SelectWithUnionQuery`, `Function`, `TableIdentifier`, `Literal`, ... */
  kind: string;
  /** What follows the kind: a function's or a table's name, a literal's value. */
  name: string;
}

/** Statement kinds that only read: SELECT (with UNION, INTERSECT, EXCEPT), EXPLAIN, DESCRIBE, SHOW (TABLES and DATABASES only: below), SHOW CREATE, EXISTS. */
const READING_STATEMENTS = new Set(['SelectWithUnionQuery', 'Explain', 'DescribeQuery', 'ShowTables', 'ShowCreateTableQuery', 'ExistsTableQuery']);

/**
 * Scalar functions that read files or dictionaries (whose sources are files, URLs or other
 * servers), the server's own settings (its paths) or the machine's (its name, kernel, disks), or
 * other databases' columns.
 */
const FORBIDDEN_FUNCTIONS =
  /^(file|catboostevaluate|naivebayesclassifier|joinget|joingetornull|dict[a-z0-9]*|getserversetting|getmergetreesetting|hascolumnintable|hostname|fqdn|fullhostname|displayname|getoskernelversion|filesystem[a-z]*)$/;

/** Table functions that make rows out of nothing or out of the statement itself; every other one reads from somewhere. */
const ALLOWED_TABLE_FUNCTIONS = new Set(['numbers', 'numbers_mt', 'zeros', 'zeros_mt', 'generate_series', 'generateseries', 'values', 'view', 'format', 'null', 'generaterandom']);

/** Databases other than the results' that a name may point into without a database clause. */
const OTHER_DATABASES = /^(system|information_schema)\./i;

export function parseAstDump(lines: readonly string[]): AstNode[] {
  return lines
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const text = line.trimStart();
      const space = text.indexOf(' ');
      const kind = space < 0 ? text : text.slice(0, space);
      const rest = space < 0 ? '' : text.slice(space + 1).replace(/ \(children \d+\)$/, '');
      // ClickHouse prints an alias as it was written, `)` and spaces included: a function's name
      // is its first word, and anything else's name ends where its alias begins.
      const name = kind === 'Function' ? rest.split(' ')[0]! : rest.replace(/ \(alias .*$/, '').trim();
      return { depth: line.length - text.length, kind, name };
    });
}

/**
 * Why the statement may not run on the results (a sentence for the user), or undefined when it
 * may. `text`: the statement as `formatQuery` gives it, where a FORMAT clause starts a line of its
 * own (every statement kind places it differently in the parse; a literal's newline is escaped).
 */
export function refusal(nodes: readonly AstNode[], resultsDatabase: string, text: string): string | undefined {
  const [statement] = nodes;
  if (!statement) return 'the statement is empty';
  if (!READING_STATEMENTS.has(statement.kind)) {
    return `only SELECT, EXPLAIN, DESCRIBE, SHOW TABLES, SHOW DATABASES, SHOW CREATE TABLE and EXISTS read the results; this statement is a ${statement.kind}`;
  }
  // ClickHouse parses every SHOW over a system table as one kind (SETTINGS, CLUSTERS, MERGES,
  // DICTIONARIES, FILESYSTEM CACHES ...): only the tables and databases are the results' own.
  if (statement.kind === 'ShowTables' && !/^SHOW (TABLES|DATABASES)\b/.test(text)) {
    return `${/^SHOW [A-Z]+(?: (?:CACHES|TABLES))?/.exec(text)?.[0] ?? 'this SHOW'} reads the server's own tables; SHOW TABLES and SHOW DATABASES are answered`;
  }
  // Its only child a table function's definition, not a statement that reads.
  if (statement.kind === 'Explain' && /TABLE OVERRIDE/i.test(statement.name)) return 'EXPLAIN TABLE OVERRIDE names a table elsewhere; explain a statement that reads the results';
  for (const [index, node] of nodes.entries()) {
    // The statement's own literal child is the file of INTO OUTFILE (its FORMAT is an Identifier, SETTINGS a Set).
    if (node.depth === statement.depth + 1 && node.kind === 'Literal') return 'INTO OUTFILE writes a file; results are read, never written to files';
    if (node.kind === 'Function') {
      const name = node.name.toLowerCase();
      const parent = parentOf(nodes, index);
      if (parent?.kind === 'TableExpression') {
        if (!ALLOWED_TABLE_FUNCTIONS.has(name)) return `the table function ${node.name}() reads outside the results; query the results' tables`;
      } else if (FORBIDDEN_FUNCTIONS.test(name)) {
        return `${node.name}() reads files, dictionaries or the machine's own settings, outside the results`;
      }
    }
    if (node.kind === 'TableIdentifier' && node.name.includes('.') && !node.name.startsWith(`${resultsDatabase}.`)) {
      return `${node.name} is outside the results database (${resultsDatabase})`;
    }
    if ((node.kind === 'Identifier' || node.kind === 'TableIdentifier') && OTHER_DATABASES.test(`${node.name}.`)) {
      return `${node.name} is outside the results database (${resultsDatabase})`;
    }
  }
  const format = /^FORMAT (\S+)/m.exec(text);
  if (format) return `FORMAT ${format[1]} in the statement: the answer's format is the request's (format=json|columns|csv|table, --format)`;
  return undefined;
}

function parentOf(nodes: readonly AstNode[], index: number): AstNode | undefined {
  const depth = nodes[index]?.depth ?? 0;
  for (let i = index - 1; i >= 0; i--) if ((nodes[i]?.depth ?? 0) < depth) return nodes[i];
  return undefined;
}
