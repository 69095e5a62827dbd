/**
 * Where a command finds the results it reads, and the apps' saved queries: a ClickHouse server,
 * or the embedded results, through the process that holds them when one runs (local-endpoint.ts).
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { appSpecSchema, ErrorCode, loadConfigFile, PanoptesError, projectRoot, type AppSpec, type CompiledConfig, type Logger } from '../core/index.js';
import { createChdbSink, createClickHouseSink, type ResultSink } from '../sinks/index.js';
import { openSink } from './adapters.js';
import { holderOf, runningResults } from './local-endpoint.js';

export interface ResultsOptions {
  dataDir: string;
  url?: string;
  database: string;
  maxRows: number;
  timeout: number;
  maxResultMb: number;
  maxMemoryMb: number;
}

/**
 * The results a query reads, read-only: a ClickHouse server's, or the embedded ones, through the
 * process that holds them open when one runs (local-endpoint.ts).
 */
export async function openResults(opts: ResultsOptions, log: Logger): Promise<{ sink: ResultSink; held: boolean }> {
  const mib = 1024 * 1024;
  const limits = { maxResultRows: opts.maxRows, maxExecutionS: opts.timeout, maxResultBytes: opts.maxResultMb * mib, maxMemoryBytes: opts.maxMemoryMb * mib };
  if (opts.url) return { sink: createClickHouseSink({ url: opts.url, database: opts.database, readOnly: true, limits, logger: log }), held: false };
  const running = await runningResults(opts.dataDir, limits);
  if (running) return { sink: running, held: false };
  const path = join(resolve(opts.dataDir), 'clickhouse');
  if (!existsSync(path)) {
    throw new PanoptesError(ErrorCode.QueryFailed, `no results in ${path}; run \`npm start\` or \`panoptes replay\` first, or pass --data-dir`);
  }
  const holder = await holderOf(opts.dataDir);
  if (holder) throw new PanoptesError(ErrorCode.SinkUnavailable, `the results in ${path} are held by ${holder}, which does not answer queries now; try again when it ends`);
  return { sink: createChdbSink({ path, readOnly: true, limits, logger: log }), held: true };
}

/** The app of this name in configs/apps. */
export function shippedApp(name: string): AppSpec | undefined {
  const file = join(projectRoot(), 'configs/apps', `${name}.yaml`);
  return existsSync(file) ? loadConfigFile(appSpecSchema, file) : undefined;
}

/** The deployment's results, read-only; embedded ones another process holds are refused naming that process. */
export async function openStore(config: CompiledConfig, logger: Logger): Promise<ResultSink> {
  // Asked first: chDB would print its own lock error besides ours.
  const holder = config.deployment.sink.kind === 'chdb' ? await holderOf(config.dataDir) : undefined;
  if (holder) throw new PanoptesError(ErrorCode.SinkUnavailable, `the results in ${join(config.dataDir, 'clickhouse')} are held by ${holder}; stop it, or give this run another --data-dir`);
  return openSink(config, { logger, readOnly: true });
}

/** Every app in configs/apps. */
export function shippedApps(): AppSpec[] {
  const dir = join(projectRoot(), 'configs/apps');
  return readdirSync(dir).filter((f) => f.endsWith('.yaml')).map((f) => loadConfigFile(appSpecSchema, join(dir, f)));
}

/** The SQL of `<app>.<query>`, among the apps `appNamed` finds. */
export const savedQueryOf = (appNamed: (name: string) => AppSpec | undefined) => (name: string): string => {
  const [app = '', query = '', ...rest] = name.split('.');
  // A name, not a path: it picks a file in configs/apps.
  const spec = /^[a-z0-9][a-z0-9._-]*$/.test(app) && rest.length === 0 ? appNamed(app) : undefined;
  if (!spec) throw new PanoptesError(ErrorCode.AppNotFound, `saved query ${name}: no app named "${app}"; give <app>.<query>, e.g. traffic.crossings (on the command line, --app-file <app.yaml> for an app outside configs/apps)`);
  const queries = spec.queries;
  // Own names only: `constructor` is no saved query.
  const sql = Object.hasOwn(queries, query) ? queries[query] : undefined;
  if (typeof sql !== 'string') {
    const known = Object.keys(queries).map((q) => `${app}.${q}`).join(', ') || 'none';
    const why = query === '' ? `name one of app ${app}'s queries as <app>.<query>` : `app ${app} has no query "${query}"`;
    throw new PanoptesError(ErrorCode.QueryFailed, `saved query ${name}: ${why}; saved queries: ${known}`);
  }
  return sql;
};
export const savedQuery = savedQueryOf(shippedApp);
