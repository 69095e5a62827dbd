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
    // One Kafka broker and one ClickHouse server for the run (or PANOPTES_KAFKA_BROKERS and
    // PANOPTES_CLICKHOUSE_URL); tests reach them through test/servers.ts.
    globalSetup: ['test/servers-setup.ts'],
    // onnxruntime's telemetry off in tests that load it directly, as analyzers/onnx/runtime.ts does.
    env: { ORT_DISABLE_TELEMETRY: '1' },
  },
});
