// A real ClickHouse server (Debian's `clickhouse-server` package) for tests and development:
// one process with its config, data and logs in one folder, reachable on 127.0.0.1 only.
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findExecutable, freePort, lastLines, portFree, spawnServer, stopProcess, waitUntilReady } from '../processes.js';

/** Where Debian's package puts the server; PATH is searched when it is not there. */
const DEBIAN_BINARY = '/usr/sbin/clickhouse-server';

export interface ClickHouseServer {
  /** The HTTP interface for clients: "http://127.0.0.1:<httpPort>". */
  url: string;
  httpPort: number;
  /** The native protocol's port (clickhouse-client). */
  tcpPort: number;
  dataDir: string;
  pid: number;
  /** What `SELECT version()` answered, e.g. "18.16.1". */
  version: string;
  /** SIGTERM (a clean shutdown), then SIGKILL if it has not exited after 15 s. */
  stop(): Promise<void>;
  /** SIGKILL: the server dies as in a crash; its data stays for a restart. */
  kill(): Promise<void>;
}

export interface ClickHouseServerOptions {
  /** Reusing a dataDir (with the same ports) restarts that server with its tables and rows. */
  dataDir?: string;
  httpPort?: number;
  tcpPort?: number;
  /** A server that outlives this process (the `npm run clickhouse -- start` command). */
  detached?: boolean;
  log?: (line: string) => void;
}

/** Why no server can be started here, or undefined when one can. Cheap: looks at files only. */
export function clickhouseUnavailableReason(): string | undefined {
  return clickhouseBinary() ? undefined : 'clickhouse-server not found (apt-get install clickhouse-server)';
}

/** Starts a server and resolves once it answers over HTTP. Ports are free ones unless given. */
export async function startClickHouseServer(options: ClickHouseServerOptions = {}): Promise<ClickHouseServer> {
  const binary = clickhouseBinary();
  if (!binary) throw new Error('clickhouse-server not found: apt-get install clickhouse-server');
  const httpPort = options.httpPort ?? (await freePort());
  let tcpPort = options.tcpPort ?? (await freePort());
  while (tcpPort === httpPort) tcpPort = await freePort();
  // A server still on a given port (the previous one not yet gone) would answer the readiness
  // check in this one's place.
  for (const port of [httpPort, tcpPort]) {
    if (!(await portFree(port))) throw new Error(`cannot start ClickHouse: port ${port} on 127.0.0.1 is in use`);
  }
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'panoptes-clickhouse-')));
  const logDir = join(dataDir, 'log');
  const errorLog = join(logDir, 'error.log');
  const consoleLog = join(logDir, 'console.log');
  const config = join(dataDir, 'config.xml');
  await mkdir(logDir, { recursive: true });
  // Rewritten on every start: the ports (or this code's settings) may have changed.
  await writeFile(config, configXml(dataDir, httpPort, tcpPort));
  await writeFile(join(dataDir, 'users.xml'), USERS_XML);

  // The server logs into its files; what it prints before its logger is up goes into console.log.
  const errorStart = existsSync(errorLog) ? statSync(errorLog).size : 0;
  const consoleStart = existsSync(consoleLog) ? statSync(consoleLog).size : 0;
  const server = spawnServer(binary, [`--config-file=${config}`], { cwd: dataDir, logFile: consoleLog, detached: options.detached ?? false });

  const logsSince = async (): Promise<string> => {
    const tail = async (file: string, start: number): Promise<string> =>
      lastLines((await readFile(file).catch(() => Buffer.alloc(0))).subarray(start).toString('utf8'), 25);
    const errors = await tail(errorLog, errorStart);
    const printed = await tail(consoleLog, consoleStart);
    return [errors && `${errorLog}:\n${errors}`, printed && `${consoleLog}:\n${printed}`].filter(Boolean).join('\n') || '(nothing logged)';
  };
  const url = `http://127.0.0.1:${httpPort}`;
  let version: string | undefined;
  await waitUntilReady(server, 'ClickHouse', async () => (version = await selectVersion(url)) !== undefined, logsSince);
  options.log?.(`ClickHouse ${version} at ${url} (pid ${server.pid}, data in ${dataDir})`);
  const { pid } = server;
  return { url, httpPort, tcpPort, dataDir, pid, version: version ?? '', stop: () => stopProcess(pid), kill: () => stopProcess(pid, 0) };
}

/** The server's version, or undefined while it does not answer. */
async function selectVersion(url: string): Promise<string | undefined> {
  try {
    // Without a kept-alive connection: a stop waits (up to 5 s) for idle connections to close.
    const response = await fetch(`${url}/?query=${encodeURIComponent('SELECT version()')}`, {
      headers: { connection: 'close' },
      signal: AbortSignal.timeout(2_000),
    });
    const body = (await response.text()).trim();
    return response.ok && body ? body : undefined;
  } catch {
    return undefined; // not listening yet
  }
}

function clickhouseBinary(): string | undefined {
  return findExecutable('clickhouse-server', [DEBIAN_BINARY]);
}

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

// `<yandex>` is the root element in the 18.x series (Debian's package); newer servers accept it
// too. Every path is inside dataDir, so nothing is written under /var/lib/clickhouse.
function configXml(dataDir: string, httpPort: number, tcpPort: number): string {
  const dir = (sub: string): string => xml(`${join(dataDir, sub)}/`);
  return `<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>${xml(join(dataDir, 'log/server.log'))}</log>
    <errorlog>${xml(join(dataDir, 'log/error.log'))}</errorlog>
    <console>0</console>
  </logger>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <!-- 3 s as in newer servers (18.x: 10 s): @clickhouse/client drops idle sockets after 2.5 s,
       and a stop waits for idle kept-alive connections (up to 5 s), so it ends sooner. -->
  <keep_alive_timeout>3</keep_alive_timeout>
  <path>${dir('data')}</path>
  <tmp_path>${dir('tmp')}</tmp_path>
  <user_files_path>${dir('user_files')}</user_files_path>
  <format_schema_path>${dir('format_schemas')}</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
</yandex>
`;
}

// One user, "default", without a password, from 127.0.0.1 only.
const USERS_XML = `<?xml version="1.0"?>
<yandex>
  <profiles>
    <default/>
    <readonly><readonly>1</readonly></readonly>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default/></quotas>
</yandex>
`;
