// vitest globalSetup: one ClickHouse server for the whole run, handed to tests as inject('clickhouse').
// PANOPTES_CLICKHOUSE_URL names a server started elsewhere (CI starts one with `npm run clickhouse`);
// PANOPTES_CLICKHOUSE_REQUIRED=1 turns "no server" from skipped tests into a failed run.
import { rm } from 'node:fs/promises';
import type { TestProject } from 'vitest/node';
import { clickhouseUnavailableReason, startClickHouseServer } from '../tools/clickhouse/server.js';

export type ClickHouseContext = { url: string } | { skipReason: string };

declare module 'vitest' {
  export interface ProvidedContext {
    clickhouse: ClickHouseContext;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const given = process.env.PANOPTES_CLICKHOUSE_URL;
  if (given) {
    project.provide('clickhouse', { url: given });
    return undefined;
  }
  const required = process.env.PANOPTES_CLICKHOUSE_REQUIRED === '1';
  const reason = clickhouseUnavailableReason();
  if (reason) {
    if (required) throw new Error(`PANOPTES_CLICKHOUSE_REQUIRED=1 but no ClickHouse server can be started: ${reason}`);
    project.provide('clickhouse', { skipReason: reason });
    return undefined;
  }
  try {
    const server = await startClickHouseServer({ log: (line) => console.log(line) });
    project.provide('clickhouse', { url: server.url });
    return async () => {
      await server.stop();
      await rm(server.dataDir, { recursive: true, force: true });
    };
  } catch (err) {
    if (required) throw err;
    project.provide('clickhouse', { skipReason: `the ClickHouse server did not start: ${(err as Error).message}` });
    return undefined;
  }
}
