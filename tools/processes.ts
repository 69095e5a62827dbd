// Helpers for the servers that tools start for tests and development (tools/kafka,
// tools/clickhouse): finding the program, starting it with its output in a log file, waiting
// until it answers, free ports, liveness, and ending a process by pid.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, openSync, readFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { delimiter, join } from 'node:path';

/** The first of `paths`, then `command` on PATH, that is an executable file. */
export function findExecutable(command: string, paths: readonly string[] = []): string | undefined {
  const onPath = (process.env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, command));
  return [...paths, ...onPath].find((file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

export interface ServerSpawnOptions {
  cwd: string;
  /** Where its stdout and stderr go (appended): never into this process's stdio (vitest's or a terminal's). */
  logFile: string;
  /** Outlives this process (`npm run <server> -- start`); otherwise it is killed when this process exits. */
  detached?: boolean;
}

/** Starts a server program; check `failure()` for a spawn that failed (e.g. no such program). */
export function spawnServer(command: string, args: readonly string[], options: ServerSpawnOptions): { child: ChildProcess; pid: number; failure: () => Error | undefined } {
  const logFd = openSync(options.logFile, 'a');
  const child = spawn(command, args, { cwd: options.cwd, detached: options.detached ?? false, stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  let failed: Error | undefined;
  child.once('error', (err) => (failed = err));
  if (child.pid === undefined) throw new Error(`could not start ${command} (is it installed?)`);
  if (options.detached) {
    child.unref();
  } else {
    // An attached server must not outlive this process, even when it ends without teardown.
    const killOnExit = (): void => void child.kill('SIGKILL');
    process.on('exit', killOnExit);
    child.once('exit', () => process.off('exit', killOnExit));
  }
  return { child, pid: child.pid, failure: () => failed };
}

/**
 * Polls `ready` until it holds. Fails, quoting `logs()`, when the process failed to spawn, exited
 * first, or was not ready within `timeoutMs` (then it is killed).
 */
export async function waitUntilReady(
  server: { child: ChildProcess; pid: number; failure: () => Error | undefined },
  name: string,
  ready: () => Promise<boolean>,
  logs: () => Promise<string>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const failure = server.failure();
    if (failure) throw new Error(`${name} failed to start: ${failure.message}`);
    const { exitCode, signalCode } = server.child;
    if (exitCode !== null || signalCode !== null) throw new Error(`${name} exited (${exitCode ?? signalCode}) before it was ready; ${await logs()}`);
    if (await ready()) return;
    if (Date.now() > deadline) {
      await stopProcess(server.pid, 0);
      throw new Error(`${name} was not ready after ${timeoutMs / 1000} s; ${await logs()}`);
    }
    await sleep(100);
  }
}

/** A port on 127.0.0.1 that nothing listens on now (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Whether a server could listen on 127.0.0.1:port now. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Whether a TCP connection to 127.0.0.1:port succeeds. */
export function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Ends a process by pid (one started by another process too): SIGTERM, SIGKILL after `graceMs`. */
export async function stopProcess(pid: number, graceMs = 15_000): Promise<void> {
  if (graceMs > 0 && signal(pid, 'SIGTERM') && (await exited(pid, graceMs))) return;
  if (signal(pid, 'SIGKILL')) await exited(pid, 10_000);
}

/** Whether the process is alive (a zombie, dead but not yet reaped, is not). */
export function processAlive(pid: number): boolean {
  if (!signal(pid, 0)) return false;
  try {
    // Linux: the state letter follows the command name in parentheses.
    return !/\)\s+Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true; // no /proc (macOS): signal 0 is the best answer there
  }
}

export function lastLines(text: string, n: number): string {
  return text.trimEnd().split('\n').slice(-n).join('\n');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function signal(pid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false; // gone already
  }
}

async function exited(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (processAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
  return true;
}
