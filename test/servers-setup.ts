// vitest globalSetup: one Kafka broker and one ClickHouse server for the whole run, handed to
// tests as inject('kafka') and inject('clickhouse') (read them through test/servers.ts).
// PANOPTES_KAFKA_BROKERS / PANOPTES_CLICKHOUSE_URL name servers started elsewhere (CI starts
// them with `npm run kafka|clickhouse -- start`); PANOPTES_KAFKA_REQUIRED=1 /
// PANOPTES_CLICKHOUSE_REQUIRED=1 turn "no server" from skipped tests into a failed run.
import { rm } from 'node:fs/promises';
import type { TestProject } from 'vitest/node';
import { clickhouseUnavailableReason, startClickHouseServer } from '../tools/clickhouse/server.js';
import { kafkaUnavailableReason, startKafkaBroker } from '../tools/kafka/broker.js';

export type ServerContext = { address: string } | { skipReason: string };
export type ServerKind = 'kafka' | 'clickhouse';

declare module 'vitest' {
  export interface ProvidedContext {
    kafka: ServerContext;
    clickhouse: ServerContext;
  }
}

interface Started {
  address: string;
  dataDir: string;
  stop(): Promise<void>;
}

const SERVERS: Record<ServerKind, { name: string; env: string; unavailable: () => string | undefined; start: () => Promise<Started> }> = {
  kafka: {
    name: 'Kafka broker',
    env: 'KAFKA_BROKERS',
    unavailable: kafkaUnavailableReason,
    start: async () => {
      const broker = await startKafkaBroker({ log: (line) => console.log(line) });
      return { ...broker, address: broker.brokers };
    },
  },
  clickhouse: {
    name: 'ClickHouse server',
    env: 'CLICKHOUSE_URL',
    unavailable: clickhouseUnavailableReason,
    start: async () => {
      const server = await startClickHouseServer({ log: (line) => console.log(line) });
      return { ...server, address: server.url };
    },
  },
};

/** Provides one kind of server; returns its teardown when this setup started it. */
async function provide(project: TestProject, kind: ServerKind): Promise<(() => Promise<void>) | undefined> {
  const { name, env, unavailable, start } = SERVERS[kind];
  const given = process.env[`PANOPTES_${env}`];
  if (given) {
    project.provide(kind, { address: given });
    return undefined;
  }
  const required = process.env[`PANOPTES_${kind.toUpperCase()}_REQUIRED`] === '1';
  const reason = unavailable();
  try {
    if (reason) throw new Error(reason);
    const server = await start();
    project.provide(kind, { address: server.address });
    return async () => {
      await server.stop();
      await rm(server.dataDir, { recursive: true, force: true });
    };
  } catch (err) {
    if (required) throw new Error(`PANOPTES_${kind.toUpperCase()}_REQUIRED=1 but no ${name} could be had: ${(err as Error).message}`, { cause: err });
    project.provide(kind, { skipReason: reason ?? `the ${name} did not start: ${(err as Error).message}` });
    return undefined;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const teardowns = await Promise.all((Object.keys(SERVERS) as ServerKind[]).map((kind) => provide(project, kind)));
  return async () => {
    await Promise.all(teardowns.map((teardown) => teardown?.()));
  };
}
