import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Model and ffmpeg tests are CPU-heavy and the machines have 2 cores.
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One Kafka broker for the run (or PANOPTES_KAFKA_BROKERS); tests reach it through test/kafka.ts.
    // One ClickHouse server likewise (or PANOPTES_CLICKHOUSE_URL), through test/clickhouse.ts.
    globalSetup: ['test/kafka-setup.ts', 'test/clickhouse-setup.ts'],
  },
});
