// A Kafka broker for development and CI that outlives this command:
//   npm run kafka -- start    starts one (or finds the running one); prints 127.0.0.1:<port> last
//                             (port 9092, Kafka's usual, when it is free: configs/kafka.yaml's)
//   npm run kafka -- status   prints its address, or "not running" and exits 1
//   npm run kafka -- stop     stops it
// Each start is a fresh, empty broker in .cache/kafka/data; its log there stays after a stop.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { cacheDir, canConnect, processAlive, startKafkaBroker, stopKafkaProcess } from './broker.js';

interface State {
  brokers: string;
  port: number;
  pid: number;
  dataDir: string;
}

const home = join(cacheDir, 'kafka');
const stateFile = join(home, 'state.json');

async function running(): Promise<State | undefined> {
  if (!existsSync(stateFile)) return undefined;
  const state = JSON.parse(readFileSync(stateFile, 'utf8')) as State;
  // Both checks, so a pid reused by another program after a reboot is not taken for the broker.
  return processAlive(state.pid) && (await canConnect(state.port)) ? state : undefined;
}

async function start(): Promise<void> {
  const found = await running();
  if (found) {
    console.log(found.brokers);
    return;
  }
  const dataDir = join(home, 'data');
  await rm(dataDir, { recursive: true, force: true });
  const usual = (await isFree(9092)) && (await isFree(9093)) ? { port: 9092, controllerPort: 9093 } : {};
  const broker = await startKafkaBroker({ dataDir, detached: true, ...usual, log: (line) => console.error(line) });
  const state: State = { brokers: broker.brokers, port: broker.port, pid: broker.pid, dataDir };
  await mkdir(home, { recursive: true });
  await writeFile(stateFile, `${JSON.stringify(state, null, 2)}\n`);
  console.error(`Kafka broker ${broker.pid} started; log: ${join(dataDir, 'broker.log')}`);
  console.log(broker.brokers);
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function stop(): Promise<void> {
  const found = await running();
  if (found) await stopKafkaProcess(found.pid);
  await rm(stateFile, { force: true });
  console.log(found ? `stopped ${found.brokers}` : 'not running');
}

async function status(): Promise<void> {
  const found = await running();
  console.log(found ? found.brokers : 'not running');
  if (!found) process.exitCode = 1;
}

const commands: Record<string, () => Promise<void>> = { start, stop, status };
const command = commands[process.argv[2] ?? ''];
if (!command) {
  console.error('usage: npm run kafka -- start|stop|status');
  process.exitCode = 2;
} else {
  await command();
}
