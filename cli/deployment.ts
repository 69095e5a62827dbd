import { join } from 'node:path';
import { createBackend, MODEL_PARAMS, createLocalAnalysis, createOnnxRuntime, taskTopics, type LocalAnalysis } from '../analyzers/index.js';
import { createAppLogic } from '../apps/index.js';
import {
  consumerGroupOf,
  describeError,
  ensureDir,
  loadDeployment,
  ErrorCode,
  Groups,
  PanoptesError,
  Topics,
  type Bus,
  type CompiledConfig,
  type Lifecycle,
  type Logger,
  type Stats,
  type TableSpec,
} from '../core/index.js';
import { createIngest, type Ingest, type SourceResult } from '../ingest/index.js';
import { createEpochService } from '../scheduler/index.js';
import { createSinkWorker, type ResultSink } from '../sinks/index.js';
import { openBus, openSink, waitUntilConsumed } from './adapters.js';
import { STATUS_EVERY_MS, statusLines, type Progress } from './progress.js';
import { modelRuntimeOptions, ownBatches, prefixFamilies, schedulerOptions } from './run-setup.js';
import { createSnapshotStore } from './snapshots.js';

export const ROLES = ['ingest', 'backend', 'sink', 'scheduler'] as const;
export type Role = (typeof ROLES)[number];

/** `all` (the scheduler too when the deployment configures it) or a comma-separated list of roles. */
export function parseRoles(text: string, config?: CompiledConfig): Set<Role> {
  if (text.trim() === 'all') return new Set<Role>(['ingest', 'backend', 'sink', ...(config?.deployment.scheduler ? (['scheduler'] as const) : [])]);
  const roles = new Set<Role>();
  for (const name of text.split(',').map((r) => r.trim())) {
    if (!(ROLES as readonly string[]).includes(name)) {
      throw new PanoptesError(ErrorCode.ConfigInvalid, `--roles: unknown role "${name}"; expected "all" or a comma-separated list of ${ROLES.join(', ')}`);
    }
    roles.add(name as Role);
  }
  return roles;
}

/** What this run did (the tables may hold earlier runs too). */
export interface RunSummary {
  wallMs: number;
  /** From the first source starting to the last row stored: the wall time without setup. */
  processingMs: number;
  roles: Role[];
  frames: number;
  rows: number;
  drops: number;
  /** Frames and tasks dropped because they could no longer meet their deadline. */
  deadlineDrops: number;
  /** Frames and tasks analyzed after their deadline. */
  late: number;
  detections: number;
  sources: SourceResult[];
}

export interface RunOptions {
  logger: Logger;
  /** Defaults to every role. */
  roles?: ReadonlySet<Role>;
  progress?: Progress;
  /** Aborting stops the sources; a process without ingest runs until it is aborted. */
  signal?: AbortSignal;
  /**
   * With ingest: keep running after every source has ended, until `signal` aborts (a service
   * that takes sources through its HTTP API).
   */
  keepRunning?: boolean;
  /** With `keepRunning`: called when every source has ended (more may be added later). */
  onSourcesEnded?: () => void;
  /** Called with the running ingest worker, to add and remove sources while it runs. */
  onIngest?: (ingest: Ingest) => void;
  /** Without ingest: called every few seconds with a line of what the roles did meanwhile, or that they are idle. */
  onStatusLine?: (line: string) => void;
  /** Called with the backend's stats each second (for metrics). */
  onStats?: (stats: Stats) => void;
  /**
   * Called with the bus once every stage has started, e.g. to watch it (live-view.ts); what it
   * returns is called before the stages close.
   */
  observe?: (bus: Bus) => Promise<() => Promise<void>>;
  /** Called with the open result store before it closes, e.g. to print an example query. */
  beforeClose?: (sink: ResultSink, summary: RunSummary) => Promise<void>;
}

/** How long a stopped run may finish its work before the bus gives up what it waits for (a broker away): the process ends within 10 s. */
const STOP_GRACE_MS = 2_000;

/**
 * Runs the given roles of a deployment in this process: ingest → bus → backend → bus → sink →
 * chDB. On the memory bus every role must run here. With ingest, returns once every source has
 * ended and, for the roles also run here, every frame's rows (or drops) are stored; without
 * ingest, serves until `signal` aborts, then finishes what it holds.
 */
export async function runDeployment(config: CompiledConfig, options: RunOptions): Promise<RunSummary> {
  const { logger } = options;
  const roles = options.roles ?? parseRoles('all', config);
  const started = Date.now();
  const { bus: busConfig, sink: sinkConfig, backend: backendConfig } = config.deployment;
  if (roles.has('scheduler') && !config.deployment.scheduler) {
    throw new PanoptesError(ErrorCode.ConfigInvalid, `--roles scheduler: ${config.file} has no \`scheduler:\` section (where its profiles are)`);
  }
  if (busConfig.kind === 'memory' && !['ingest', 'backend', 'sink'].every((r) => roles.has(r as Role))) {
    throw new PanoptesError(ErrorCode.ConfigInvalid, `--roles ${[...roles].join(',')}: the memory bus runs every role in one process; use a deployment with bus.kind: kafka to split them`);
  }

  // Checked first, naming the path: chDB's own recursive mkdir never returns under /proc.
  if (roles.has('sink') && sinkConfig.kind === 'chdb') ensureDir(join(config.dataDir, 'clickhouse'), 'dataDir');
  const families = roles.has('backend') || roles.has('scheduler') ? await prefixFamilies(config, logger) : [];
  const models = { ...config.models, ...Object.fromEntries(families.map((f) => [f.name, f])) };
  const scheduling = roles.has('scheduler') ? schedulerOptions(config, families, logger) : undefined;
  const apps = Object.values(config.apps).map(createAppLogic);
  const tasks = taskTopics(apps);
  /** The backends' group of a topic they consume: the frames' or a model's tasks'. */
  const backendGroupOf = (topic: string): string => consumerGroupOf(topic) ?? Groups.backend;
  if (!roles.has('ingest') && !options.signal) throw new PanoptesError(ErrorCode.ConfigInvalid, 'a process without the ingest role needs a stop signal');

  // A consumer that died for good stops the run as a stop signal would, and fails it.
  const stopping = new AbortController();
  options.signal?.addEventListener('abort', () => stopping.abort(), { once: true });
  let fatal: unknown;
  const failed = (): boolean => fatal !== undefined;
  const bus = await openBus(config, logger, (err) => {
    logger.error({ err }, 'a bus consumer stopped on an error it cannot retry; stopping');
    fatal ??= err;
    stopping.abort();
  });
  // On Kafka, past the grace what waits on the bus fails at once (the broker keeps what was not
  // committed); the errors that follow are the stop's, not failures.
  let forced = false;
  const stopDeadline = (): void => {
    setTimeout(() => {
      forced = true;
      void bus.close({ graceMs: 0 });
    }, STOP_GRACE_MS).unref();
  };
  if (bus.kind === 'kafka') stopping.signal.addEventListener('abort', stopDeadline, { once: true });
  const unlessForced = (err: unknown): void => {
    if (!forced) throw err;
  };
  const retentionMs = busConfig.kind === 'kafka' ? busConfig.retentionMs : undefined;
  await bus
    .createTopics([Topics.frames, Topics.backfillFrames, ...tasks, Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead].map((name) => ({ name, partitions: busConfig.partitions, ...(retentionMs ? { retentionMs } : {}) })))
    .catch(async (err: unknown) => {
      await bus.close();
      throw err;
    });

  const tables = [...new Map<string, TableSpec>(apps.flatMap((a) => a.tables.map((t) => [t.name, t]))).values()];
  // Frames name their apps; this is for frames from older ingest workers.
  const appsBySource = new Map(config.sources.map((s) => [s.id, s.apps]));
  const sink = roles.has('sink') ? openSink(config, { logger }) : undefined;
  const sinkWorker = sink && createSinkWorker({ bus, sink, tables, batchRows: sinkConfig.batchRows, flushMs: sinkConfig.flushMs, groupId: Groups.sink, logger });
  const runtime = roles.has('backend')
    ? createOnnxRuntime({ ...modelRuntimeOptions(config), logger })
    : undefined;
  const batchOf = runtime && ownBatches(config, logger);
  const snapshots = runtime && backendConfig.snapshots ? createSnapshotStore({ dataDir: config.dataDir, retentionDays: sinkConfig.retentionDays, logger }) : undefined;
  const backend = runtime && batchOf && createBackend({
    id: `${process.pid}-0`,
    bus,
    runtime,
    models,
    apps,
    appsForSource: (source) => appsBySource.get(source) ?? [],
    batch: batchOf,
    batching: backendConfig.batching === 'on-time' ? 'tardy' : 'early',
    stages: backendConfig.stages,
    planAhead: backendConfig.planAhead,
    groupId: Groups.backend,
    ...(options.onStats ? { onStats: options.onStats } : {}),
    ...(snapshots ? { snapshots } : {}),
    logger,
  });
  const scheduler = scheduling && createEpochService({ bus, ...scheduling });
  const localSettings = roles.has('ingest') ? config.deployment.ingest.localAnalysis : undefined;
  // Without the backend role here, local analysis gets a runtime of its own.
  const localRuntime = localSettings && !runtime ? createOnnxRuntime({ workers: 1, logger }) : runtime;
  const localAnalysis: LocalAnalysis | undefined = localSettings && localRuntime
    ? createLocalAnalysis({
        bus,
        runtime: localRuntime,
        models: config.models,
        apps: Object.values(config.apps),
        model: localSettings.model,
        replaces: localSettings.replaces ?? localSettings.model,
        maxBadRate: localSettings.maxBadRate,
        holdMs: localSettings.holdS * 1000,
        logger,
      })
    : undefined;
  const stages: Lifecycle<unknown>[] = [scheduler, sinkWorker, backend].filter((s) => s !== undefined);
  let stopObserving: (() => Promise<void>) | undefined;

  try {
    // A stop that comes while a stage still joins its group abandons the join once the bus closes.
    const startAll = async (): Promise<void> => {
      for (const stage of stages) await stage.start();
      await localAnalysis?.start();
      stopObserving = await options.observe?.(bus);
    };
    await startAll().catch(unlessForced);
    const processingStarted = Date.now();
    let sources: SourceResult[] = [];
    // Progress counts frames the models have seen here (ingest runs ahead by what the bus
    // holds), or the frames published when the models run elsewhere.
    let published = 0;
    let expected: number | undefined;
    let worker: Ingest | undefined;
    let flushing = false;
    let progressEnded = false;
    const showProgress = (): void => {
      if (progressEnded) return;
      const frames = backend ? backend.status().frames : published;
      options.progress?.update({ stage: flushing ? 'flushing results' : stageOf(frames), frames, total: expected, sources: worker?.metrics().length ?? config.sources.length });
    };
    /** What a replay does before its frames flow: the first frames wait on synthetic footage, sources opening, models loading. */
    const stageOf = (frames: number): string => {
      if (!worker || frames > 0) return worker ? 'replaying' : 'starting';
      const opening = worker.metrics().filter((s) => s.state === 'starting');
      if (published === 0 && opening.length > 0) return opening.some((s) => config.sources.find((c) => c.id === s.id)?.synthetic) ? 'rendering footage' : 'opening sources';
      return backend && published > 0 ? 'loading models' : 'replaying';
    };
    const ticker = setInterval(showProgress, 200);
    const status = statusLines({
      ...(backend ? { backend: () => backend.status() } : {}),
      ...(sinkWorker ? { sink: () => sinkWorker.status() } : {}),
      ...(scheduler ? { scheduler: () => scheduler.status() } : {}),
    });
    const statusTicker = !roles.has('ingest') && options.onStatusLine ? setInterval(() => options.onStatusLine?.(status.line()), STATUS_EVERY_MS) : undefined;
    try {
      // A stop that came while the stages started: no source is opened.
      if (roles.has('ingest') && !stopping.signal.aborted) {
        for (const skipped of config.skipped) logger.info(skipped, 'source skipped');
        const ingest = createIngest({
          bus,
          dataDir: config.dataDir,
          logger,
          ...(localAnalysis ? { local: localAnalysis } : {}),
          onProgress: (frames, total) => {
            published = frames;
            expected = total;
          },
        });
        try {
          for (const source of config.sources) ingest.add(source, 'file');
          worker = ingest;
          options.onIngest?.(ingest);
          // A service says when its footage is analyzed and stored, and keeps serving.
          if (options.keepRunning) {
            const gone = (): boolean => stopping.signal.aborted;
            void ingest
              .idle()
              .then(() => waitUntilConsumed(bus, backendGroupOf, [Topics.frames, Topics.backfillFrames, ...tasks], gone))
              .then(() => sinkWorker && waitUntilConsumed(bus, Groups.sink, [Topics.results, Topics.drops], gone))
              .then(() => {
                if (gone()) return;
                showProgress();
                options.progress?.stop();
                progressEnded = true;
                options.onSourcesEnded?.();
              })
              .catch((err: unknown) => logger.debug({ err }, 'waiting for the sources to end'));
          }
          await (options.keepRunning ? aborted(stopping.signal) : Promise.race([ingest.idle(), aborted(stopping.signal)]));
        } finally {
          sources = await ingest.close();
        }
      } else {
        await aborted(stopping.signal);
      }
      // The rows of every frame published here: the backends' (here or elsewhere), then the sink's.
      const stopNow = (): boolean => failed() || forced;
      if (roles.has('ingest') && stages.length > 0) await waitUntilConsumed(bus, backendGroupOf, [Topics.frames, Topics.backfillFrames, ...tasks], stopNow).catch(unlessForced);
      await backend?.drain().catch(unlessForced);
      flushing = true;
      if (roles.has('ingest') && sinkWorker) {
        // Every frame published here is analyzed (its rows sent): the last rows go in as they
        // come, not a flush interval later.
        sinkWorker.finish();
        await waitUntilConsumed(bus, Groups.sink, [Topics.results, Topics.drops], stopNow).catch(unlessForced);
        // The backends' last stats, sent once their last outcomes were in.
        await waitUntilConsumed(bus, Groups.sink, [Topics.stats], stopNow, { upToNow: true }).catch(unlessForced);
      }
      await sinkWorker?.drain();
      if (fatal) throw fatal;
    } finally {
      clearInterval(ticker);
      clearInterval(statusTicker);
    }
    showProgress();
    options.progress?.stop();

    const summary: RunSummary = {
      wallMs: Date.now() - started,
      processingMs: Date.now() - processingStarted,
      roles: [...roles],
      frames: backend?.status().frames ?? 0,
      rows: sinkWorker?.status().rowsInserted ?? 0,
      // Frames a truncated recording owed count too: ingest recorded them as drops.
      drops: (backend?.status().drops ?? 0) + (sinkWorker?.status().rowsDropped ?? 0) + sources.reduce((n, s) => n + (s.missing?.frames ?? 0), 0),
      deadlineDrops: backend?.status().dropsByReason.deadline ?? 0,
      late: backend?.status().late ?? 0,
      detections: backend?.status().rowsByTable.detections ?? 0,
      sources,
    };
    if (sink) await options.beforeClose?.(sink, summary);
    return summary;
  } finally {
    options.progress?.stop();
    await stopObserving?.().catch((err: unknown) => logger.error({ err }, 'closing the observer failed'));
    await localAnalysis?.close().catch((err: unknown) => logger.error({ err }, 'local analysis close failed'));
    for (const stage of [...stages].reverse()) await stage.close().catch((err: unknown) => logger.error({ err }, 'stage close failed'));
    await runtime?.close();
    snapshots?.close();
    if (localRuntime !== runtime) await localRuntime?.close();
    await bus.close();
    await sink?.close();
  }
}

/**
 * Reads the deployment file again and makes the sources from it match (see `Ingest.reconcile`):
 * the sources whose config did not change keep running. Apps, models, bus and sink are read at
 * start only: a reload that changes the apps is refused, whole.
 */
export async function reloadSources(config: CompiledConfig, ingest: Ingest, logger: Logger): Promise<void> {
  try {
    const next = loadDeployment(config.file, { dataDir: config.dataDir, params: MODEL_PARAMS });
    const [before, after] = [Object.keys(config.apps).sort().join(','), Object.keys(next.apps).sort().join(',')];
    if (before !== after) throw new PanoptesError(ErrorCode.ConfigInvalid, `${config.file}: apps changed (${before} → ${after}); restart to load other apps`);
    const changes = await ingest.reconcile(next.sources);
    logger.warn(changes, `reloaded ${config.file}`);
  } catch (err) {
    logger.error({ code: (err as { code?: string }).code }, `reload refused; the sources run as before: ${describeError(err)}`);
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
