/**
 * SQL over HTTP: `GET /query?sql=<SELECT ...>&format=json|csv|table`, or `?saved=<app>.<query>`
 * for an app's saved query. Answers come from a read-only sink, so the engine itself refuses
 * writes however they are phrased, and its row and time limits apply. Listens on 127.0.0.1
 * unless told otherwise.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ErrorCode, PanoptesError, serializeError, type Logger } from '../core/index.js';
import type { ResultSink } from '../sinks/index.js';
import { listen } from './listen.js';
import { formatTable, type OutputFormat } from './output.js';

export interface QueryServerOptions {
  sink: ResultSink;
  /** The SQL of `<app>.<query>`; throws when there is none. */
  savedQuery: (name: string) => string;
  port: number;
  host?: string;
  logger: Logger;
}

const STATUS: Partial<Record<string, number>> = {
  [ErrorCode.QueryReadOnly]: 403,
  [ErrorCode.QueryFailed]: 400,
  [ErrorCode.AppNotFound]: 404,
  [ErrorCode.SinkUnavailable]: 503,
};
const FORMATS: readonly OutputFormat[] = ['json', 'csv', 'table'];

export async function startQueryServer(options: QueryServerOptions): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((request, response) => {
    answer(request, response, options).catch((err: unknown) => {
      options.logger.error({ err }, 'query endpoint failed');
      if (!response.headersSent) response.writeHead(500);
      response.end();
    });
  });
  return listen(server, options.port, options.host);
}

async function answer(request: IncomingMessage, response: ServerResponse, options: QueryServerOptions): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://localhost');
  if (url.pathname !== '/query') return reply(response, 404, { error: { message: 'not found; ask GET /query?sql=...' } });
  if (request.method !== 'GET') return reply(response, 405, { error: { message: 'only GET' } });
  const format = (url.searchParams.get('format') ?? 'json') as OutputFormat;
  try {
    if (!FORMATS.includes(format)) throw new PanoptesError(ErrorCode.QueryFailed, `format must be one of ${FORMATS.join(', ')}, got "${format}"`);
    const saved = url.searchParams.get('saved');
    const sql = saved ? options.savedQuery(saved) : url.searchParams.get('sql');
    if (!sql) throw new PanoptesError(ErrorCode.QueryFailed, 'give ?sql=<SELECT ...> or ?saved=<app>.<query>');
    const result = await options.sink.query(sql);
    if (format === 'json') return reply(response, 200, result);
    response.writeHead(200, { 'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'text/plain; charset=utf-8' });
    response.end(`${formatTable(result, format)}\n`);
  } catch (err) {
    const error = serializeError(err);
    reply(response, STATUS[error.code] ?? 500, { error: { code: error.code, message: error.message } });
  }
}

function reply(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  response.end(JSON.stringify(body));
}
