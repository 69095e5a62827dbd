/**
 * Queries while a run holds the embedded results. chDB opens a data folder in one process at a
 * time, so the process holding it (a run, a replay, `serve`) answers queries for the others on
 * the same machine: it serves `/query` on a Unix socket in `<dataDir>/run/` (a folder only its
 * owner can enter), and `panoptes query` or `serve` send their queries there when it answers.
 * The holder's own read-only sessions run them: the same read-only guarantees and limits.
 */
import { request } from 'node:http';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ErrorCode, PanoptesError, type Logger } from '../core/index.js';
import { checkAnswer, type QueryLimits, type QueryResult, type ResultSink } from '../sinks/index.js';
import { startHttpApi, type QuerySlots } from './http-api.js';

/** What the holder writes beside its socket, to be named in messages. */
interface Holder {
  pid: number;
  command: string;
  startedAt: string;
  /** Whether it answers on the socket (a data directory's path can be too long for one). */
  socket: boolean;
}

const runDir = (dataDir: string): string => join(resolve(dataDir), 'run');
const socketOf = (dataDir: string): string => join(runDir(dataDir), 'panoptes.sock');
const holderFile = (dataDir: string): string => join(runDir(dataDir), 'holder.json');
/** Unix socket paths are limited to 107 bytes on Linux. */
const MAX_SOCKET_PATH = 100;

/**
 * Answers queries on `<dataDir>/run/panoptes.sock` from `reader` until closed, and says in
 * `holder.json` beside it which process holds the results.
 */
export async function serveLocalQueries(options: { dataDir: string; reader: ResultSink; savedQuery: (name: string) => string; slots?: QuerySlots; logger: Logger }): Promise<{ close(): Promise<void> }> {
  const { dataDir, logger } = options;
  const path = socketOf(dataDir);
  ownFolder(runDir(dataDir));
  // This process holds the results, so a socket left here belongs to a process that is gone.
  rmSync(path, { force: true });
  const socket = Buffer.byteLength(path) <= MAX_SOCKET_PATH;
  if (!socket) logger.warn({ path }, 'the data directory path is too long for a local socket: other processes cannot query these results while this one runs');
  const server = socket ? await startHttpApi({ path, logger, queries: { sink: options.reader, savedQuery: options.savedQuery, ...(options.slots ? { slots: options.slots } : {}) } }) : undefined;
  const holder: Holder = { pid: process.pid, command: ['panoptes', ...process.argv.slice(2)].join(' '), startedAt: new Date().toISOString(), socket };
  // Written whole and renamed into place: a link planted at the name is replaced, not followed.
  const part = `${holderFile(dataDir)}.${process.pid}`;
  writeFileSync(part, `${JSON.stringify(holder)}\n`, { mode: 0o600, flag: 'wx' });
  renameSync(part, holderFile(dataDir));
  return {
    async close() {
      rmSync(holderFile(dataDir), { force: true });
      await server?.close();
    },
  };
}

/**
 * `run/` must be this user's alone: the socket in it answers queries, and a folder others can
 * write to would let them put their own socket (and answers) in its place.
 */
function ownFolder(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stats = lstatSync(dir);
  const uid = process.getuid?.();
  if (!stats.isDirectory() || (uid !== undefined && stats.uid !== uid)) {
    throw new PanoptesError(ErrorCode.ConfigInvalid, `${dir} is not a folder of this user's (a link, or another user's): remove it, or use another --data-dir`);
  }
  if ((stats.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

/** The results as the process holding them answers for them, or undefined when none runs. */
export async function runningResults(dataDir: string, limits: QueryLimits = {}): Promise<ResultSink | undefined> {
  const path = socketOf(dataDir);
  if (!(await answers(path))) return undefined;
  // The holder runs the query within its own limits (memory, time); this command's, where
  // tighter, bound the wait and the answer here.
  const timeoutMs = (limits.maxExecutionS ?? 30) * 1000;
  return {
    kind: 'chdb',
    async query(sql) {
      const text = await send(path, 'POST', '/query', JSON.stringify({ sql, format: 'columns' }), timeoutMs);
      const answer = JSON.parse(text) as QueryResult;
      checkAnswer({ rows: answer.rows.length, bytes: Buffer.byteLength(text) }, limits);
      return answer;
    },
    ensureTables: () => Promise.reject(new PanoptesError(ErrorCode.QueryReadOnly, 'results answered by another process are read-only')),
    insert: () => Promise.reject(new PanoptesError(ErrorCode.QueryReadOnly, 'results answered by another process are read-only')),
    close: async () => {},
  };
}

const answers = (socketPath: string): Promise<boolean> =>
  existsSync(socketPath) ? send(socketPath, 'GET', '/health', undefined, 5_000).then(() => true, () => false) : Promise.resolve(false);

/**
 * Which process holds the results in `dataDir`, as a phrase for messages: one that says so in
 * `holder.json`, still runs, is not this one, and answers on its socket where it made one. A
 * file left by a process that is gone (killed, or its pid taken by another since) names none.
 */
export async function holderOf(dataDir: string): Promise<string | undefined> {
  let holder: Holder;
  try {
    holder = JSON.parse(readFileSync(holderFile(dataDir), 'utf8')) as Holder;
    if (holder.pid === process.pid) return undefined;
    process.kill(holder.pid, 0);
  } catch {
    return undefined;
  }
  if (holder.socket && !(await answers(socketOf(dataDir)))) return undefined;
  return `process ${holder.pid} (${holder.command}, since ${holder.startedAt})`;
}

/** One request on the socket; the body of a 2xx answer, else the API's error as a PanoptesError. */
function send(socketPath: string, method: 'GET' | 'POST', path: string, body: string | undefined, timeoutMs: number): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const req = request({ socketPath, method, path, headers: { host: 'localhost', ...(body ? { 'content-type': 'application/json' } : {}) }, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if ((res.statusCode ?? 500) < 300) return resolvePromise(text);
        let error: { code?: string; message?: string } = {};
        try {
          error = (JSON.parse(text) as { error?: typeof error }).error ?? {};
        } catch {
          // Not the API's shape: said below as it came.
        }
        reject(new PanoptesError((error.code as ErrorCode | undefined) ?? ErrorCode.QueryFailed, error.message ?? `the process holding the results answered ${res.statusCode}: ${text.slice(0, 200)}`));
      });
    });
    req.on('timeout', () => req.destroy(new PanoptesError(ErrorCode.QueryFailed, `the process holding the results did not answer within ${timeoutMs / 1000} s`)));
    req.on('error', reject);
    req.end(body);
  });
}
