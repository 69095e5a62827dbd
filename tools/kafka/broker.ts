// A real single-node Kafka broker (KRaft: one process is broker and controller) for tests and
// development. Its jars come from Maven Central through `mvn` (tools/kafka/pom.xml), so a
// machine needs only java and mvn: no Docker, no tarball download.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { projectRoot } from '../../core/paths.js';
import { canConnect, findExecutable, freePort, lastLines, processAlive, spawnServer, stopProcess, waitUntilReady } from '../processes.js';

const KAFKA_VERSION = '3.9.1';
const root = projectRoot();
const pom = join(root, 'tools/kafka/pom.xml');
/** Where downloads and the development broker live (git-ignored). */
const cacheDir = join(root, '.cache');
const defaultJarsDir = join(cacheDir, `kafka-${KAFKA_VERSION}`, 'lib');
const run = promisify(execFile);

export interface KafkaBroker {
  /** The bootstrap address for clients: "127.0.0.1:<port>". */
  brokers: string;
  port: number;
  controllerPort: number;
  dataDir: string;
  pid: number;
  /** SIGTERM (a clean shutdown), then SIGKILL if it has not exited after 15 s. */
  stop(): Promise<void>;
  /** SIGKILL: the broker dies as in a crash; its data stays for a restart. */
  kill(): Promise<void>;
}

export interface KafkaBrokerOptions {
  /** Reusing a dataDir (with the same ports) restarts that broker with its topics and offsets. */
  dataDir?: string;
  port?: number;
  controllerPort?: number;
  heapMb?: number;
  /** A broker that outlives this process (the `npm run kafka -- start` command). */
  detached?: boolean;
  log?: (line: string) => void;
}

/** Why no broker can be started here, or undefined when one can. Cheap: looks at PATH only. */
export function kafkaUnavailableReason(): string | undefined {
  if (!findExecutable('java')) return 'java not found on PATH (install a JDK 17 or newer to run the Kafka tests)';
  // Maven is needed only until the jars are in the cache.
  if (!jarsComplete(defaultJarsDir) && !findExecutable('mvn')) return 'mvn not found on PATH (install Maven to fetch the Kafka jars once)';
  return undefined;
}

/** The folder of Kafka's jars, copied there by Maven on first use. */
export async function ensureKafkaJars(options: { cacheDir?: string; log?: (line: string) => void } = {}): Promise<string> {
  const jarsDir = options.cacheDir ?? defaultJarsDir;
  if (jarsComplete(jarsDir)) return jarsDir;
  if (!findExecutable('java')) throw new Error('java not found on PATH: install a JDK 17 or newer to run Kafka');
  if (!findExecutable('mvn')) throw new Error('mvn not found on PATH: install Maven to fetch the Kafka jars');
  options.log?.(`fetching the Kafka ${KAFKA_VERSION} jars with Maven into ${jarsDir} (once)`);
  // Maven copies into a private folder that is renamed into place only when complete, so a
  // killed download is redone and two processes fetching at once do not mix their files.
  const partial = `${jarsDir}.partial-${process.pid}`;
  await removeAbandoned(jarsDir);
  try {
    await run('mvn', ['-q', '-B', '-f', pom, 'dependency:copy-dependencies', `-DoutputDirectory=${partial}`], { maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    await rm(partial, { recursive: true, force: true });
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`mvn could not fetch the Kafka jars:\n${lastLines(`${e.stdout ?? ''}${e.stderr ?? e.message}`, 30)}`);
  }
  await writeFile(join(partial, MARKER), pomHash());
  await rm(jarsDir, { recursive: true, force: true });
  await rename(partial, jarsDir).catch(async (err: unknown) => {
    await rm(partial, { recursive: true, force: true });
    if (!jarsComplete(jarsDir)) throw err; // another process won the race; its copy is as good
  });
  return jarsDir;
}

/** Removes the partial copies of fetches whose process died (killed tests, Ctrl-C). */
async function removeAbandoned(jarsDir: string): Promise<void> {
  const prefix = `${basename(jarsDir)}.partial-`;
  const siblings = await readdir(dirname(jarsDir)).catch(() => []);
  for (const name of siblings) {
    const pid = Number(name.slice(prefix.length));
    if (name.startsWith(prefix) && (pid === process.pid || !processAlive(pid))) {
      await rm(join(dirname(jarsDir), name), { recursive: true, force: true });
    }
  }
}

/** Starts a broker and resolves once it accepts clients. Ports are free ones unless given. */
export async function startKafkaBroker(options: KafkaBrokerOptions = {}): Promise<KafkaBroker> {
  const jars = join(await ensureKafkaJars({ log: options.log }), '*');
  const port = options.port ?? (await freePort());
  let controllerPort = options.controllerPort ?? (await freePort());
  while (controllerPort === port) controllerPort = await freePort();
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'panoptes-kafka-')));
  const logDirs = join(dataDir, 'logs');
  const props = join(dataDir, 'server.properties');
  const log4j = join(dataDir, 'log4j.properties');
  const logFile = join(dataDir, 'broker.log');
  await mkdir(dataDir, { recursive: true });
  await writeFile(props, serverProperties(port, controllerPort, logDirs));
  await writeFile(log4j, LOG4J);
  const logConfig = `-Dlog4j.configuration=${pathToFileURL(log4j).href}`;

  // A formatted log dir holds the cluster's metadata; formatting it again would refuse or wipe.
  if (!existsSync(join(logDirs, 'meta.properties'))) {
    try {
      await run('java', [logConfig, '-cp', jars, 'kafka.tools.StorageTool', 'format', '-t', newClusterId(), '-c', props]);
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      throw new Error(`formatting the Kafka storage in ${logDirs} failed:\n${lastLines(`${e.stdout ?? ''}${e.stderr ?? e.message}`, 30)}`);
    }
  }

  const logStart = existsSync(logFile) ? statSync(logFile).size : 0;
  const broker = spawnServer('java', [`-Xmx${options.heapMb ?? 512}m`, logConfig, '-cp', jars, 'kafka.Kafka', props], {
    cwd: dataDir,
    logFile,
    detached: options.detached ?? false,
  });
  const logSince = async (): Promise<string> => (await readFile(logFile)).subarray(logStart).toString('utf8');
  const ready = async (): Promise<boolean> => (await logSince()).includes('Kafka Server started') && (await canConnect(port));
  await waitUntilReady(broker, 'the Kafka broker', ready, async () => `${logFile} says:\n${logExcerpt(await logSince())}`);
  const brokers = `127.0.0.1:${port}`;
  const { pid } = broker;
  return { brokers, port, controllerPort, dataDir, pid, stop: () => stopProcess(pid), kill: () => stopProcess(pid, 0) };
}

const MARKER = '.complete';

function jarsComplete(jarsDir: string): boolean {
  try {
    return readFileSync(join(jarsDir, MARKER), 'utf8') === pomHash();
  } catch {
    return false;
  }
}

/** The marker holds the pom's hash, so editing the pom fetches the jars again. */
function pomHash(): string {
  return createHash('sha256').update(readFileSync(pom)).digest('hex');
}

function serverProperties(port: number, controllerPort: number, logDirs: string): string {
  return `${[
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
    `listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${port}`,
    'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    `log.dirs=${logDirs}`,
    'num.partitions=1',
    'auto.create.topics.enable=false',
    // One node: every internal topic has one replica, and few partitions keep the first
    // consumer group and transaction quick to set up.
    'offsets.topic.replication.factor=1',
    'offsets.topic.num.partitions=1',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'transaction.state.log.num.partitions=1',
    'group.initial.rebalance.delay.ms=0',
    'log.segment.bytes=16777216',
  ].join('\n')}\n`;
}

// Into stdout, which is the broker's log file. The config dump (300 lines) is left out so the
// end of the log, quoted in errors, shows what happened.
const LOG4J = `log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaConfig=WARN
`;

/** Kafka's cluster ids are 16 random bytes in base64url; one starting with '-' reads as a flag. */
function newClusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/** The broker's first error (its cause; a failed start ends in shutdown noise) and last lines. */
function logExcerpt(log: string): string {
  const lines = log.trimEnd().split('\n');
  const error = lines.findIndex((line) => /^\[[^\]]+\] (ERROR|FATAL) /.test(line));
  const cause = error < 0 ? '' : `${lines.slice(error, error + 3).join('\n')}\n...\n`;
  return cause + lines.slice(-25).join('\n');
}
