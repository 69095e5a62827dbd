/** The ClickHouse server that test/clickhouse-setup.ts started (or was given), for `describe.skipIf`. */
import { inject } from 'vitest';
import type { ClickHouseContext } from './clickhouse-setup.js';

let warned = false;

function clickhouse(): ClickHouseContext {
  // Undefined when a config without the global setup runs the test.
  return (
    (inject('clickhouse') as ClickHouseContext | undefined) ?? {
      skipReason: 'no ClickHouse global setup (test/clickhouse-setup.ts) in this vitest config',
    }
  );
}

/** "http://127.0.0.1:<port>" of the server, or undefined when ClickHouse tests skip. */
export function clickhouseUrl(): string | undefined {
  const c = clickhouse();
  return 'url' in c ? c.url : undefined;
}

/** Why ClickHouse tests skip (warned once per test file), or undefined when a server is there. */
export function clickhouseSkipReason(): string | undefined {
  const c = clickhouse();
  if ('url' in c) return undefined;
  if (!warned) console.warn(`ClickHouse tests skipped: ${c.skipReason}`);
  warned = true;
  return c.skipReason;
}
