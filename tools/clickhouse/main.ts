// A ClickHouse server for development and CI that outlives this command:
//   npm run clickhouse -- start    starts one (or finds the running one); prints its URL last
//                                  (HTTP 8123 and TCP 9000, ClickHouse's usual, when they are free)
//   npm run clickhouse -- status   prints its URL, or "not running" and exits 1
//   npm run clickhouse -- stop     stops it
// Each start is a fresh, empty server in .cache/clickhouse/data; its logs there stay after a stop.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { canConnect, portFree, processAlive, stopProcess } from '../processes.js';
import { startClickHouseServer } from './server.js';

interface State {
  url: string;
  httpPort: number;
  tcpPort: number;
  pid: number;
  dataDir: string;
}

const home = join(projectRoot(), '.cache', 'clickhouse');
const stateFile = join(home, 'state.json');

async function running(): Promise<State | undefined> {
  if (!existsSync(stateFile)) return undefined;
  const state = JSON.parse(readFileSync(stateFile, 'utf8')) as State;
  // Both checks, so a pid reused by another program after a reboot is not taken for the server.
  return processAlive(state.pid) && (await canConnect(state.httpPort)) ? state : undefined;
}

async function start(): Promise<void> {
  const found = await running();
  if (found) {
    console.log(found.url);
    return;
  }
  const dataDir = join(home, 'data');
  await rm(dataDir, { recursive: true, force: true });
  const usual = (await portFree(8123)) && (await portFree(9000)) ? { httpPort: 8123, tcpPort: 9000 } : {};
  const server = await startClickHouseServer({ dataDir, detached: true, ...usual, log: (line) => console.error(line) });
  const state: State = { url: server.url, httpPort: server.httpPort, tcpPort: server.tcpPort, pid: server.pid, dataDir };
  await mkdir(home, { recursive: true });
  await writeFile(stateFile, `${JSON.stringify(state, null, 2)}\n`);
  console.error(`ClickHouse server ${server.pid} started; logs: ${join(dataDir, 'log')}`);
  console.log(server.url);
}

async function stop(): Promise<void> {
  const found = await running();
  if (found) await stopProcess(found.pid);
  await rm(stateFile, { force: true });
  console.log(found ? `stopped ${found.url}` : 'not running');
}

async function status(): Promise<void> {
  const found = await running();
  console.log(found ? found.url : 'not running');
  if (!found) process.exitCode = 1;
}

/** The checkout (the folder with package.json), whether this runs from source or from dist/. */
function projectRoot(): string {
  for (let dir = import.meta.dirname; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`package.json not found above ${import.meta.dirname}`);
  }
}

const commands: Record<string, () => Promise<void>> = { start, stop, status };
const command = commands[process.argv[2] ?? ''];
if (!command) {
  console.error('usage: npm run clickhouse -- start|stop|status');
  process.exitCode = 2;
} else {
  await command();
}
