#!/usr/bin/env node
import { existsSync, readFileSync } from 'node:fs';
import { basename, extname, join, relative, resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import {
  appSpecSchema,
  compileDeployment,
  configJsonSchema,
  createLogger,
  CONFIG_KINDS,
  deploymentSchema,
  describeError,
  ensureDir,
  ErrorCode,
  loadDeployment,
  loadConfigFile,
  loadModelZoo,
  PanoptesError,
  projectRoot,
  redact,
  redactUrl,
  type Bus,
  type CompiledConfig,
  type ConfigKind,
  type Logger,
  type Stats,
} from '../core/index.js';
import { MODEL_PARAMS } from '../analyzers/index.js';
import type { Ingest } from '../ingest/index.js';
import { parseRoles, reloadSources, runDeployment, type Role, type RunSummary } from './deployment.js';
import { createMetrics, type Metrics } from './metrics.js';
import { apiToken } from './http-guards.js';
import { createQuerySlots, sourcePolicy, startHttpApi, type HttpApi } from './http-api.js';
import { formatTable, type OutputFormat } from './output.js';
import { addSchedulerCommands } from './scheduler-commands.js';
import { createProgress } from './progress.js';
import { serveLocalQueries } from './local-endpoint.js';
import { openResults, openStore, savedQuery, savedQueryOf, shippedApps, type ResultsOptions } from './results.js';
import { createLiveView } from './live-view.js';
import { snapshotsDir } from './snapshots.js';

const EXAMPLE_QUERY = 'SELECT class, count() AS n FROM detections GROUP BY class ORDER BY n DESC';

function parseSpeed(value: string): number | 'max' {
  if (value === 'max') return 'max';
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a positive number or "max"');
  return n;
}

function parsePositive(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a positive number');
  return n;
}

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError('expected a TCP port, 1 to 65535');
  return n;
}

/** A query's limits, the same for `query` and `serve`. */
const limitOptions = {
  maxRows: () => new Option('--max-rows <n>', 'refuse an answer longer than this').argParser(parsePositive).default(100_000),
  timeout: () => new Option('--timeout <s>', 'stop a query running longer than this, seconds').argParser(parsePositive).default(30),
  maxResultMb: () => new Option('--max-result-mb <MB>', 'refuse an answer larger than this').argParser(parsePositive).default(64),
  maxMemoryMb: () => new Option('--max-memory-mb <MB>', 'stop a query using more memory than this').argParser(parsePositive).default(1024),
};

const dataDirOption = (): Option => new Option('--data-dir <dir>', 'where results and generated footage are kept').default('./data');

/**
 * Runs a deployment's roles with a progress display and SIGINT/SIGTERM for a clean stop, and
 * SIGHUP to reload its sources. With `httpPort`, serves the HTTP API (/health, /metrics,
 * /sources; /query where this process stores the results) and keeps running after the sources
 * end, until stopped.
 */
async function runPipeline(config: CompiledConfig, roles: Set<Role>, logger: Logger, httpPort?: number): Promise<void> {
  const embedded = roles.has('sink') && config.deployment.sink.kind === 'chdb';
  // Checked first, naming the key: chDB's own recursive mkdir never returns under /proc.
  if (embedded) ensureDir(join(config.dataDir, 'clickhouse'), 'dataDir');
  // Read-only sessions of its own beside the sink's: queries never touch what the sink writes with.
  const reader = roles.has('sink') ? await openStore(config, logger) : undefined;
  const savedQuery = savedQueryOf((app) => config.apps[app]);
  // The embedded results open in this process only: it answers the other processes' queries.
  // Its HTTP and local listeners answer from one pool of query slots.
  const slots = createQuerySlots();
  const local = reader && embedded ? await serveLocalQueries({ dataDir: config.dataDir, reader, savedQuery, slots, logger }) : undefined;
  try {
    if (httpPort === undefined) return await runRoles(config, roles, logger, undefined);
    const metrics = createMetrics();
    const token = apiToken(config.dataDir, config.deployment.http.token);
    const server = await startHttpApi({
      port: httpPort,
      logger,
      metrics,
      allowedHosts: config.deployment.http.allowedHosts,
      sources: { config, policy: sourcePolicy(config), token },
      dashboard: true,
      snapshots: snapshotsDir(config.dataDir),
      ...(reader ? { queries: { sink: reader, savedQuery, slots } } : {}),
    });
    process.stderr.write(`dashboard at ${server.url}/ (API: ${server.url}/openapi.json; adding or removing sources needs the token in ${token.where})\n`);
    try {
      await runRoles(config, roles, logger, { metrics, server });
    } finally {
      await server.close();
    }
  } finally {
    await local?.close();
    await reader?.close();
  }
}

/**
 * How long a stopped `run` waits for the event loop to empty by itself. Every stage has closed
 * by then; what is left open is a client library's retry timer or socket (kafkajs keeps
 * reconnecting to a broker that is away), nothing that still has work to finish.
 */
const EXIT_GRACE_MS = 2000;

async function runRoles(config: CompiledConfig, roles: Set<Role>, logger: Logger, http: { metrics: Metrics; server: HttpApi } | undefined): Promise<void> {
  const abort = new AbortController();
  const stop = (): void => {
    const what = roles.has('ingest') ? 'the sources stop; the frames already read from them are analyzed and stored' : 'what this process has taken in is finished and committed';
    process.stderr.write(`stopping: ${what} (press Ctrl-C again to quit at once)\n`);
    process.once('SIGINT', () => process.exit(130));
    process.once('SIGTERM', () => process.exit(143));
    abort.abort();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  let ingest: Ingest | undefined;
  const reload = (): void => {
    if (ingest) void reloadSources(config, ingest, logger);
  };
  process.on('SIGHUP', reload);
  const summary = await runDeployment(config, {
    logger,
    roles,
    ...(roles.has('ingest') ? { progress: createProgress() } : { onStatusLine: (line: string) => void process.stderr.write(`${line}\n`) }),
    signal: abort.signal,
    ...(http
      ? {
          keepRunning: true,
          onSourcesEnded: () => process.stderr.write(`every source has ended and its results are stored; serving ${http.server.url}/ until stopped (Ctrl-C)\n`),
          onStats: (stats: Stats) => http.metrics.update(stats),
          observe: async (bus: Bus) => {
            const view = createLiveView({ bus, logger });
            await view.start();
            http.server.attachLive(view);
            return () => view.close();
          },
        }
      : {}),
    onIngest: (worker) => {
      ingest = worker;
      http?.server.attach(worker);
    },
    beforeClose: async (sink, done) => {
      printSummary(done, config);
      // Nothing analyzed (every source failed): no example to show, and the error line follows.
      if (done.frames === 0) return;
      const result = await sink.query(EXAMPLE_QUERY);
      process.stdout.write(`\nexample query: ${EXAMPLE_QUERY}\n${formatTable(result, 'table')}\n`);
      // Each app's first saved query, as `panoptes query --saved` runs it.
      for (const app of Object.values(config.apps)) {
        const [name, sql] = Object.entries(app.queries)[0] ?? [];
        if (!name || !sql) continue;
        process.stdout.write(`\nsaved query ${app.name}.${name}:\n${formatTable(await sink.query(sql), 'table')}\n`);
      }
      const where = config.deployment.sink.kind === 'chdb' ? `--data-dir ${config.dataDir}` : `--url ${redactUrl(config.deployment.sink.url)} --database ${config.deployment.sink.database}`;
      process.stdout.write(`\nquery the results yourself:\n  npx panoptes query "SELECT class, count() AS n FROM detections GROUP BY class" ${where}\n`);
      // A deployment file, not a replay's, run whole (every role): the same run again serves the dashboard.
      if (!http && roles.has('ingest') && roles.has('backend') && existsSync(config.file)) process.stdout.write(`watch it in the dashboard, with the results so far:\n  npx panoptes run ${relative(process.cwd(), config.file) || config.file} --http-port 8081\n`);
    },
  }).catch((err: unknown) => {
    // Recorded before the exit timer is armed: the error line comes after the cleanup, which may outlast it.
    process.exitCode = 1;
    throw err;
  }).finally(() => {
    process.off('SIGHUP', reload);
    // Every stage has committed and closed. A client library that still holds a socket (kafkajs can
    // keep one after a broker restart) must not keep a stopped process alive: said, then exit.
    setTimeout(() => {
      logger.warn({ open: process.getActiveResourcesInfo() }, 'stopped, but handles are still open; exiting');
      process.exit();
    }, EXIT_GRACE_MS).unref();
  });
  if (!roles.has('sink')) printSummary(summary, config);
  // A batch job that lost a source says so in its exit code, whatever the others stored.
  const failed = summary.sources.filter((s) => s.error);
  if (failed.length > 0) {
    process.exitCode = 1;
    const which = failed.length === summary.sources.length ? 'every source failed' : `${failed.length} of ${summary.sources.length} sources failed (the others ran to their end)`;
    throw new PanoptesError(ErrorCode.SourceDecode, `${which}: ${failed.map((s) => `${s.id}: ${firstLine(s.error)}`).join('; ')}`);
  }
}

function packageVersion(): string {
  return (JSON.parse(readFileSync(join(projectRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

const firstLine = (text = ''): string => text.split('\n')[0] ?? '';

function resultsLocation(config: CompiledConfig): string {
  const sink = config.deployment.sink;
  return sink.kind === 'chdb' ? join(config.dataDir, 'clickhouse') : `${redactUrl(sink.url)} (database ${sink.database})`;
}

/** What this process did, by role: what it replayed, analyzed, stored. */
function printSummary(summary: RunSummary, config: CompiledConfig): void {
  const roles = new Set(summary.roles);
  const lines = [
    ...(roles.has('ingest')
      ? [
          `\nreplayed ${summary.sources.length} source${summary.sources.length === 1 ? '' : 's'} in ${(summary.wallMs / 1000).toFixed(1)} s`,
          ...[...summary.sources].sort((a, b) => a.id.localeCompare(b.id)).map((s) => `  ${s.id}: ${s.frames} frames${s.missing ? `, ${s.missing.frames} MISSING: the recording ends early (drops rows with reason truncated)` : ''}${s.error ? `, FAILED: ${firstLine(s.error)}` : ''}`),
          ...config.skipped.map((s) => `  ${s.id}: skipped (${s.reason})`),
        ]
      : [`\nstopped ${summary.roles.join(', ')} after ${(summary.wallMs / 1000).toFixed(1)} s`]),
    ...(roles.has('backend') ? [`frames: ${summary.frames}  detections: ${summary.detections}  drops: ${summary.drops}  wall time: ${(summary.wallMs / 1000).toFixed(1)} s`] : []),
    ...(roles.has('sink') ? [`rows stored: ${summary.rows}`, `results in ${resultsLocation(config)}`] : []),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

export function buildProgram(): Command {
  const program = new Command('panoptes')
    .description('Video analytics: camera, Twitch and recorded footage in, SQL-queryable results out')
    .version(packageVersion(), '--version', 'print the version')
    // Argument errors read like every other error: one line, `panoptes: …`.
    .configureOutput({ outputError: (text, write) => write(`panoptes: ${text.trim().replace(/^error: /, '')} (see --help)\n`) })
    .option('--log-level <level>', 'trace, debug, info, warn, error or silent', process.env.PANOPTES_LOG_LEVEL ?? 'warn');

  const logger = (): Logger => createLogger({ level: program.opts<{ logLevel: 'info' }>().logLevel });

  program
    .command('run')
    .description('run a deployment: every role in one process, or some of them against Kafka')
    .argument('<deployment.yaml>', 'deployment file, e.g. configs/demo.yaml')
    .addOption(new Option('--data-dir <dir>', "where results and generated footage are kept (default: the deployment's dataDir, ./data)"))
    .option('--roles <roles>', 'roles to run in this process: "all" or a comma-separated subset of ingest,backend,sink,scheduler (split roles need bus.kind: kafka)', 'all')
    .option('--http-port <port>', 'serve the HTTP API on 127.0.0.1 at this port (/health, /metrics, /sources, /query; adding or removing sources needs the API token) and keep running until stopped', parsePort)
    .action(async (file: string, opts: { dataDir?: string; roles: string; httpPort?: number }) => {
      const config = loadDeployment(file, { params: MODEL_PARAMS, ...(opts.dataDir ? { dataDir: opts.dataDir } : {}) });
      await runPipeline(config, parseRoles(opts.roles, config), logger(), opts.httpPort);
    });

  program
    .command('replay')
    .description('replay a recorded file (or URL) through one app')
    .argument('<file-or-url>', 'video file or URL ffmpeg can read')
    .requiredOption('--app <name-or-file>', 'app to run: a name from configs/apps (e.g. traffic) or an app file (my-app.yaml)')
    .option('--fps <n>', 'frames per second to sample (default: the file\'s own rate)', parsePositive)
    .option('--speed <speed>', '1 = real time, N = N times faster, max = as fast as possible', parseSpeed, 'max' as const)
    .option('--width <px>', 'scale frames to this width', parsePositive)
    .option('--loop', 'replay in a loop until stopped', false)
    .option('--start-time <iso>', "when the footage was recorded, e.g. 2026-05-01T08:00:00Z: rows' frame_time is this + the frame's time in the file (default: the container's creation time, else the replay's own time)")
    .addOption(dataDirOption())
    .action(async (input: string, opts: { app: string; fps?: number; speed: number | 'max'; width?: number; loop: boolean; startTime?: string; dataDir: string }) => {
      const configsDir = join(projectRoot(), 'configs');
      const appFile = /\.ya?ml$/.test(opts.app) ? resolve(opts.app) : join(configsDir, 'apps', `${opts.app}.yaml`);
      if (!existsSync(appFile)) {
        throw new PanoptesError(ErrorCode.AppNotFound, `no app named "${opts.app}" (looked for ${appFile})`);
      }
      const app = loadConfigFile(appSpecSchema, appFile).name;
      const id = basename(input, extname(input)).toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[^a-z0-9]+/, '') || 'replay';
      const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(input);
      const path = url ? input : resolve(input);
      if (!url && !existsSync(path)) throw new PanoptesError(ErrorCode.SourceNotFound, `no such file: ${input} (looked for ${path})`);
      const parsed = deploymentSchema.safeParse({
        dataDir: opts.dataDir,
        apps: [appFile],
        sources: [{ id, path, apps: [app], speed: opts.speed, loop: opts.loop, ...(opts.fps ? { fps: opts.fps } : {}), ...(opts.width ? { width: opts.width } : {}), ...(opts.startTime ? { startTime: opts.startTime } : {}) }],
      }, { reportInput: true });
      if (!parsed.success) {
        // Only the options can be wrong here: name them as the user typed them.
        const flag = (key: string): string => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
        const problems = parsed.error.issues.map((i) => `${flag(String(i.path.at(-1)))}: ${'input' in i ? `got ${JSON.stringify(i.input)}; ` : ''}${i.message}`);
        throw new PanoptesError(ErrorCode.ConfigInvalid, problems.join('; '));
      }
      const deployment = parsed.data;
      await runPipeline(compileDeployment(deployment, join(configsDir, 'replay.yaml'), { dataDir: opts.dataDir, params: MODEL_PARAMS }), parseRoles('all'), logger());
    });

  program
    .command('query')
    .description('run a read-only SQL query on the results, or an app\'s saved query')
    .argument('[sql]', 'a SELECT (or SHOW, DESCRIBE, EXPLAIN) statement')
    .option('--saved <app.query>', 'run a saved query of an app in configs/apps, e.g. traffic.objects_per_class')
    .option('--app-file <app.yaml>', 'with --saved: the app is this file, e.g. docs/examples/lobby.yaml')
    .addOption(new Option('--format <format>', 'output format').choices(['table', 'json', 'csv']).default('table'))
    .addOption(dataDirOption())
    .option('--url <url>', 'query a ClickHouse server instead of the embedded results, e.g. http://127.0.0.1:8123')
    .option('--database <name>', 'the database on the server', 'default')
    .addOption(limitOptions.maxRows())
    .addOption(limitOptions.timeout())
    .addOption(limitOptions.maxResultMb())
    .addOption(limitOptions.maxMemoryMb())
    .action(async (text: string | undefined, opts: ResultsOptions & { saved?: string; appFile?: string; format: OutputFormat }) => {
      if (opts.appFile && !opts.saved) throw new PanoptesError(ErrorCode.QueryFailed, '--app-file names the app of a --saved query; give --saved <app>.<query> too');
      const file = opts.appFile && loadConfigFile(appSpecSchema, resolve(opts.appFile));
      const sql = opts.saved ? (file ? savedQueryOf((app) => (app === file.name ? file : undefined)) : savedQuery)(opts.saved) : text;
      if (!sql || (opts.saved && text)) {
        throw new PanoptesError(ErrorCode.QueryFailed, 'give either a SQL statement or --saved <app.query>');
      }
      const { sink } = await openResults(opts, logger());
      try {
        process.stdout.write(`${formatTable(await sink.query(sql), opts.format)}\n`);
      } finally {
        await sink.close();
      }
    });

  program
    .command('serve')
    .description('answer read-only SQL over HTTP: GET /query?sql=...&format=json|columns|csv|table or ?saved=<app>.<query>, or POST /query with a JSON body')
    .addOption(dataDirOption())
    .option('--url <url>', 'serve a ClickHouse server\'s results instead of the embedded ones')
    .option('--database <name>', 'the database on the server', 'default')
    .option('--port <port>', 'HTTP port on 127.0.0.1', parsePort, 8080)
    .option('--host <address>', 'address to listen on', '127.0.0.1')
    .option('--allowed-host <name...>', 'Host header values to accept besides this host\'s addresses and localhost (a name behind a proxy)', [])
    .addOption(limitOptions.maxRows())
    .addOption(limitOptions.timeout())
    .addOption(limitOptions.maxResultMb())
    .addOption(limitOptions.maxMemoryMb())
    .action(async (opts: ResultsOptions & { port: number; host: string; allowedHost: string[] }) => {
      const log = logger();
      const { sink, held } = await openResults(opts, log);
      // Holding the embedded results, it answers the other processes' queries too.
      const slots = createQuerySlots();
      const local = held ? await serveLocalQueries({ dataDir: opts.dataDir, reader: sink, savedQuery, slots, logger: log }) : undefined;
      const server = await startHttpApi({ port: opts.port, host: opts.host, allowedHosts: opts.allowedHost, logger: log, queries: { sink, savedQuery, slots }, apps: shippedApps, dashboard: true, snapshots: snapshotsDir(opts.dataDir) }).catch(async (err: unknown) => {
        // The port is taken, or the address not this machine's: let go of the results and exit.
        await local?.close();
        await sink.close();
        throw err;
      });
      process.stderr.write(`dashboard at ${server.url}/, queries at ${server.url}/query?sql=... (Ctrl-C to stop)\n`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await server.close();
      await local?.close();
      await sink.close();
    });

  addSchedulerCommands(program, logger);

  const models = program.command('models').description('the model zoo');
  models
    .command('list')
    .description('list the models in configs/models.yaml')
    .option('--json', 'print JSON')
    .action((opts: { json?: boolean }) => {
      const zoo = Object.values(loadModelZoo());
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(zoo, null, 2)}\n`);
        return;
      }
      const rows = zoo.map((m) => ({ name: m.name, task: m.task, architecture: m.architecture, file: m.file.replace(`${projectRoot()}/`, ''), license: m.license }));
      process.stdout.write(`${formatTable({ columns: Object.keys(rows[0] ?? {}).map((name) => ({ name })), rows }, 'table')}\n`);
    });

  const config = program.command('config').description('configuration files');
  config
    .command('check')
    .description('validate a deployment and the apps and models it names')
    .argument('<deployment.yaml>')
    .action((file: string) => {
      const compiled = loadDeployment(file, { params: MODEL_PARAMS });
      process.stdout.write(`${file}: ok (${compiled.sources.length} sources, apps: ${Object.keys(compiled.apps).join(', ')})\n`);
    });
  config
    .command('schema')
    .description('print the JSON Schema of a configuration file kind, for editors')
    .addArgument(new Command().createArgument('<kind>', 'deployment, app or models').choices(Object.keys(CONFIG_KINDS)))
    .action((kind: ConfigKind) => {
      process.stdout.write(`${JSON.stringify(configJsonSchema(kind), null, 2)}\n`);
    });

  return program;
}

buildProgram()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    process.stderr.write(`panoptes: ${redact(describeError(err))}\n`);
    if (process.env.PANOPTES_LOG_LEVEL === 'debug' && err instanceof Error) process.stderr.write(`${redact(err.stack ?? '')}\n`);
    process.exitCode = 1;
  });
