// `npm run kafka|clickhouse -- start|stop|status`: one development server per kind that outlives
// the command, recorded in .cache/<kind>/state.json. Each start is a fresh, empty server in
// .cache/<kind>/data; its logs there stay after a stop.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { projectRoot } from '../core/paths.js';
import { canConnect, portFree, processAlive, stopProcess } from './processes.js';

export interface StartedServer {
  /** What clients connect to; printed as the last line of `start` and by `status`. */
  address: string;
  /** A port it listens on, to tell it from an unrelated process that got its pid. */
  port: number;
  pid: number;
}

export interface ServerCommand {
  kind: string;
  /** The ports the server usually has, used when they are all free. */
  usualPorts: readonly number[];
  start(dataDir: string, usual: boolean): Promise<StartedServer>;
}

export async function runServerCommand(server: ServerCommand, command: string | undefined): Promise<void> {
  const home = join(projectRoot(), '.cache', server.kind);
  const stateFile = join(home, 'state.json');

  const running = async (): Promise<StartedServer | undefined> => {
    if (!existsSync(stateFile)) return undefined;
    const state = JSON.parse(readFileSync(stateFile, 'utf8')) as StartedServer;
    // Both checks, so a pid reused by another program after a reboot is not taken for the server.
    return processAlive(state.pid) && (await canConnect(state.port)) ? state : undefined;
  };

  const found = await running();
  if (command === 'start') {
    if (found) return console.log(found.address);
    const dataDir = join(home, 'data');
    await rm(dataDir, { recursive: true, force: true });
    const usual = (await Promise.all(server.usualPorts.map(portFree))).every(Boolean);
    const started = await server.start(dataDir, usual);
    await mkdir(home, { recursive: true });
    await writeFile(stateFile, `${JSON.stringify(started, null, 2)}\n`);
    console.error(`${server.kind} ${started.pid} started; logs in ${dataDir}`);
    return console.log(started.address);
  }
  if (command === 'stop') {
    if (found) await stopProcess(found.pid);
    await rm(stateFile, { force: true });
    return console.log(found ? `stopped ${found.address}` : 'not running');
  }
  if (command === 'status') {
    console.log(found ? found.address : 'not running');
    if (!found) process.exitCode = 1;
    return;
  }
  console.error(`usage: npm run ${server.kind} -- start|stop|status`);
  process.exitCode = 2;
}
