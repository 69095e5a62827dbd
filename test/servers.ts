/** The servers test/servers-setup.ts started (or was given), for `describe.skipIf`. */
import { inject } from 'vitest';
import type { ServerContext, ServerKind } from './servers-setup.js';

const warned = new Set<ServerKind>();

function context(kind: ServerKind): ServerContext {
  // Undefined when a config without the global setup runs the test.
  return (inject(kind) as ServerContext | undefined) ?? { skipReason: `no global setup (test/servers-setup.ts) provides ${kind} in this vitest config` };
}

/** Where the server answers ("host:port" for Kafka, a URL for ClickHouse), or undefined when its tests skip. */
export function serverAddress(kind: ServerKind): string | undefined {
  const c = context(kind);
  return 'address' in c ? c.address : undefined;
}

/** Why tests of this server skip (warned once per test file), or undefined when it is there. */
export function serverSkipReason(kind: ServerKind): string | undefined {
  const c = context(kind);
  if ('address' in c) return undefined;
  if (!warned.has(kind)) console.warn(`${kind} tests skipped: ${c.skipReason}`);
  warned.add(kind);
  return c.skipReason;
}
