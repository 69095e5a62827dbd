// Helpers for the servers that tools start for tests and development (tools/kafka,
// tools/clickhouse): free ports, liveness, and ending a process by pid.
import { readFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';

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
