/**
 * A running deployment's HTTP endpoints, on 127.0.0.1 unless told otherwise:
 *   GET    /health            ok
 *   GET    /metrics           Prometheus text format
 *   GET    /sources           the ingest worker's sources and their figures (JSON)
 *   POST   /sources           start a source: its config as in a deployment file (JSON or YAML body)
 *   DELETE /sources/<id>      stop a source; the others keep running
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { compileSource, ErrorCode, PanoptesError, serializeError, type CompiledConfig, type Logger } from '../core/index.js';
import type { Ingest } from '../ingest/index.js';
import { listen } from './listen.js';
import type { Metrics } from './metrics.js';

export interface HttpServerOptions {
  metrics: Metrics;
  /** The deployment new sources join: their apps must be among its apps, their paths are relative to its file. */
  config: CompiledConfig;
  port: number;
  host?: string;
  logger: Logger;
}

export interface HttpServer {
  url: string;
  /** Serves /sources from this ingest worker from now on. */
  attach(ingest: Ingest): void;
  close(): Promise<void>;
}

const STATUS: Partial<Record<string, number>> = {
  [ErrorCode.ConfigInvalid]: 400,
  [ErrorCode.SourceNotFound]: 404,
  [ErrorCode.Closed]: 503,
};
const MAX_BODY_BYTES = 64 * 1024;

export async function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  const { metrics, logger } = options;
  let ingest: Ingest | undefined;
  const server: Server = createServer((request, response) => {
    answer(request, response).catch((err: unknown) => {
      const error = serializeError(err);
      const status = STATUS[error.code] ?? 500;
      if (status === 500) logger.error({ err }, 'HTTP endpoint failed');
      if (!response.headersSent) reply(response, status, { error: { code: error.code, message: error.message } });
      else response.end();
    });
  });

  async function answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    const route = `${request.method} ${path.replace(/^\/sources\/[^/]+$/, '/sources/<id>')}`;
    switch (route) {
      case 'GET /health':
        return void response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      case 'GET /metrics':
        return void response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(await metrics.registry.metrics());
      case 'GET /sources':
        return reply(response, 200, { sources: running().metrics() });
      case 'POST /sources': {
        const source = compileSource(await readBody(request), options.config, 'POST /sources');
        const worker = running();
        if (worker.metrics().some((s) => s.id === source.id && !['ended', 'failed', 'removed'].includes(s.state))) {
          return reply(response, 409, { error: { code: ErrorCode.ConfigInvalid, message: `source ${source.id} is already running; DELETE /sources/${source.id} first` } });
        }
        worker.add(source);
        return reply(response, 201, { source: worker.metrics().find((s) => s.id === source.id) });
      }
      case 'DELETE /sources/<id>':
        return reply(response, 200, await running().remove(decodeURIComponent(path.slice('/sources/'.length))));
      default:
        return reply(response, 404, { error: { message: 'GET /health, /metrics, /sources; POST /sources; DELETE /sources/<id>' } });
    }
  }

  const running = (): Ingest => {
    if (!ingest) throw new PanoptesError(ErrorCode.Closed, 'this process runs no ingest worker (see --roles), or it has not started yet');
    return ingest;
  };

  const { url, close } = await listen(server, options.port, options.host);
  return {
    url,
    attach(worker) {
      ingest = worker;
      metrics.watchSources(() => worker.metrics());
    },
    close,
  };
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > MAX_BODY_BYTES) throw new PanoptesError(ErrorCode.ConfigInvalid, `POST /sources: the body is over ${MAX_BODY_BYTES} bytes; send one source's config`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function reply(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  response.end(JSON.stringify(body));
}
