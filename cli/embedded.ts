import { join } from 'node:path';
import { createBackend, createOnnxRuntime, taskTopics } from '../analyzers/index.js';
import { createAppLogic } from '../apps/index.js';
import { createMemoryBus, Topics, type Bus, type CompiledConfig, type Logger, type TableSpec } from '../core/index.js';
import { runIngest, type SourceResult } from '../ingest/index.js';
import { createChdbSink, createSinkWorker, type ResultSink } from '../sinks/index.js';
import type { Progress } from './progress.js';

/** What this run did (the tables may hold earlier runs too). */
export interface RunSummary {
  wallMs: number;
  /** From the first source starting to the last row stored: the wall time without setup. */
  processingMs: number;
  frames: number;
  rows: number;
  drops: number;
  detections: number;
  sources: SourceResult[];
}

export interface EmbeddedOptions {
  logger: Logger;
  progress?: Progress;
  signal?: AbortSignal;
  /** Called with the open result store before it closes, e.g. to print an example query. */
  beforeClose?: (sink: ResultSink, summary: RunSummary) => Promise<void>;
}

/**
 * Every role in one process: ingest → memory bus → backend → memory bus → sink → chDB.
 * Returns once every source has ended and every frame's rows (or drops) are stored.
 */
export async function runEmbedded(config: CompiledConfig, options: EmbeddedOptions): Promise<RunSummary> {
  const { logger } = options;
  const started = Date.now();
  const { bus: busConfig, sink: sinkConfig, backend: backendConfig } = config.deployment;

  const apps = Object.values(config.apps).map(createAppLogic);
  const tasks = taskTopics(apps);
  const bus = createMemoryBus({ maxBytes: busConfig.maxBytes });
  await bus.createTopics([Topics.frames, ...tasks, Topics.results, Topics.drops].map((name) => ({ name, partitions: busConfig.partitions })));

  const tables = [...new Map<string, TableSpec>(apps.flatMap((a) => a.tables.map((t) => [t.name, t]))).values()];
  const appsBySource = new Map(config.sources.map((s) => [s.id, s.apps]));

  const sink = createChdbSink({ path: join(config.dataDir, 'clickhouse'), logger });
  const sinkWorker = createSinkWorker({ bus, sink, tables, batchRows: sinkConfig.batchRows, flushMs: sinkConfig.flushMs, logger });
  const runtime = createOnnxRuntime({ workers: backendConfig.threads, logger });
  const backend = createBackend({
    id: 'embedded-0',
    bus,
    runtime,
    models: config.models,
    apps,
    appsForSource: (source) => appsBySource.get(source) ?? [],
    batch: backendConfig.batch,
    logger,
  });

  try {
    await sinkWorker.start();
    await backend.start();
    for (const skipped of config.skipped) logger.info(skipped, 'source skipped');

    const processingStarted = Date.now();
    // Progress counts frames the models have seen; ingest runs ahead by what the bus holds.
    let expected: number | undefined;
    const showProgress = (): void => options.progress?.update(backend.status().frames, expected);
    const ticker = setInterval(showProgress, 200);
    let sources: SourceResult[];
    try {
      sources = await runIngest({
        bus,
        sources: config.sources,
        dataDir: config.dataDir,
        logger,
        ...(options.signal ? { signal: options.signal } : {}),
        onProgress: (_published, total) => (expected = total),
      });
      await waitUntilConsumed(bus, 'panoptes.backend', [Topics.frames, ...tasks]);
      await backend.drain();
      await waitUntilConsumed(bus, 'panoptes.sink', [Topics.results, Topics.drops]);
      await sinkWorker.drain();
    } finally {
      clearInterval(ticker);
    }
    showProgress();
    options.progress?.stop();
    const processingMs = Date.now() - processingStarted;

    const summary: RunSummary = {
      wallMs: Date.now() - started,
      processingMs,
      frames: backend.status().frames,
      rows: sinkWorker.status().rowsInserted,
      drops: backend.status().drops + sinkWorker.status().rowsDropped,
      detections: backend.status().rowsByTable.detections ?? 0,
      sources,
    };
    await options.beforeClose?.(sink, summary);
    return summary;
  } finally {
    options.progress?.stop();
    await backend.close().catch((err: unknown) => logger.error({ err }, 'backend close failed'));
    await sinkWorker.close().catch((err: unknown) => logger.error({ err }, 'sink close failed'));
    await runtime.close();
    await bus.close();
    await sink.close();
  }
}

/**
 * Waits until a group has committed everything produced on the topics. Commits are read
 * before end offsets: a message is committed only after the tasks it fans out to are sent,
 * so those tasks are already counted in the ends read next.
 */
async function waitUntilConsumed(bus: Bus, groupId: string, topics: readonly string[]): Promise<void> {
  for (;;) {
    const committed = await Promise.all(topics.map((topic) => bus.committed(groupId, topic)));
    const ends = await Promise.all(topics.map((topic) => bus.endOffsets(topic)));
    const behind = ends.some((partitions, i) =>
      partitions.some((end) => end.offset > (committed[i]!.find((c) => c.partition === end.partition)?.offset ?? 0)),
    );
    if (!behind) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}
