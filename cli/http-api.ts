/**
 * The HTTP API (fastify), on 127.0.0.1 unless told otherwise; its OpenAPI document is served at
 * /openapi.json. What a process serves depends on what it runs:
 *   GET    /                  the dashboard (dashboard.ts, web/)
 *   GET    /health, /ready    alive; started (503 until the pipeline runs)
 *   GET    /status            version, and whether a pipeline runs here
 *   GET    /metrics           Prometheus text format (run)
 *   GET    /sources           the ingest worker's sources and their figures (run)
 *   POST   /sources           start a source: JSON, as in a deployment file; needs the token (run)
 *   DELETE /sources/:id       stop a source; needs the token (run)
 *   GET    /sources/:id/frame[.jpg], /apps, /plan, /plan/history, /events (run; http-live.ts)
 *   GET    /query?sql=...     read-only SQL (or ?saved=<app>.<query>), format json|columns|csv|table
 *   POST   /query             the same as a JSON body { sql | saved, format }, for long SQL
 * Every request must name this server in Host and come from no other site (see http-guards.ts);
 * bodies are JSON only. Errors are `{ error: { code, message } }` with a 4xx for bad input.
 */
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyError, type FastifyReply, type FastifyRequest } from 'fastify';
import { compileSource, ErrorCode, PanoptesError, projectRoot, redact, serializeError, type AppSpec, type CompiledConfig, type Logger } from '../core/index.js';
import type { Ingest } from '../ingest/index.js';
import type { ResultSink } from '../sinks/index.js';
import { registerDashboard } from './dashboard.js';
import { allowedHosts, checkSite, checkToken, type ApiToken } from './http-guards.js';
import { answersWith, registerLiveRoutes } from './http-live.js';
import type { LiveView } from './live-view.js';
import type { Metrics } from './metrics.js';
import { formatTable, type OutputFormat } from './output.js';
import { checkCompiledSource, checkRequestedSource, checkSourceHost, normalHost, type SourcePolicy } from './source-policy.js';

export interface HttpApiOptions {
  /** A TCP port on `host`, or `path`: a Unix socket for this machine's other processes (local-endpoint.ts). */
  port?: number;
  host?: string;
  path?: string;
  /** Host header values accepted besides this host's addresses and localhost. */
  allowedHosts?: readonly string[];
  logger: Logger;
  metrics?: Metrics;
  /** Serves /query from this read-only sink, in `slots` (a process's listeners share theirs; absent, its own of 4 running and 100 waiting). */
  queries?: { sink: ResultSink; savedQuery: (name: string) => string; slots?: QuerySlots };
  /** Serves /sources: new sources join `config`, within `policy`; changes need `token`. */
  sources?: { config: CompiledConfig; policy: SourcePolicy; token: ApiToken };
  /** Serves /apps; absent, the apps of `sources.config`. */
  apps?: () => readonly AppSpec[];
  /** Serves the dashboard at /. */
  dashboard?: boolean;
  /** Serves /snapshots/… (pictures of events) from this folder. */
  snapshots?: string;
  /** How long a client has to send its whole request, and a new connection its first request's headers. @defaultValue 30 s */
  requestTimeoutMs?: number;
}

export interface HttpApi {
  url: string;
  /** Serves /sources from this ingest worker from now on. */
  attach(ingest: Ingest): void;
  /** Serves the live routes from this view from now on; /ready answers 200 from then. */
  attachLive(view: LiveView): void;
  close(): Promise<void>;
}

const STATUS: Partial<Record<string, number>> = {
  [ErrorCode.ConfigInvalid]: 400,
  [ErrorCode.HttpBadRequest]: 400,
  [ErrorCode.QueryFailed]: 400,
  [ErrorCode.HttpUnauthorized]: 401,
  [ErrorCode.HttpForbidden]: 403,
  [ErrorCode.QueryReadOnly]: 403,
  [ErrorCode.SourceNotFound]: 404,
  [ErrorCode.AppNotFound]: 404,
  [ErrorCode.PlanNotFound]: 404,
  [ErrorCode.HttpTooMany]: 429,
  [ErrorCode.Closed]: 503,
  [ErrorCode.SinkUnavailable]: 503,
};
/** What every error answers: a stable code, and a message that says what was wrong. */
const ERROR_BODY = {
  description: 'An error: `code` is stable (docs/errors.md), `message` says what was wrong',
  content: {
    'application/json': {
      schema: { type: 'object', properties: { error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } }, required: ['code', 'message'] } }, required: ['error'] },
    },
  },
} as const;

/** `json` is the CLI's `--format json` (an array of row objects); `columns` adds the columns' names and types: `{ columns, rows }`. */
const FORMATS = ['json', 'columns', 'csv', 'table'] as const;
const PACKAGE_VERSION = (JSON.parse(readFileSync(join(projectRoot(), 'package.json'), 'utf8')) as { version: string }).version;
const MAX_BODY_BYTES = 64 * 1024;
/** A client has this long to send its whole request (by default a body never finished held its socket forever). */
const REQUEST_TIMEOUT_MS = 30_000;
/** Open connections at most: idle sockets piled up by one client must not take the descriptors queries need. */
const MAX_CONNECTIONS = 512;
/**
 * Queries running at once, and waiting for one of them to end. The engine checks a query's time
 * limit only between blocks of rows, and cannot stop one whose client left: unbounded, heavy
 * queries could take every core, and a gigabyte of memory each.
 */
const QUERY_SLOTS = { running: 4, waiting: 100 };
const MAX_SQL_CHARS = 100_000;
const querySchema = {
  type: 'object',
  properties: {
    sql: { type: 'string', minLength: 1, maxLength: MAX_SQL_CHARS },
    saved: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]*\\.[a-z0-9][a-z0-9_-]*$', maxLength: 200 },
    format: { type: 'string', enum: FORMATS, default: 'json' },
  },
  additionalProperties: false,
} as const;
type QueryRequest = { sql?: string; saved?: string; format: OutputFormat | 'columns' };

/** The policy a deployment sets for sources added over HTTP, its directories made absolute (links resolved). */
export function sourcePolicy(config: CompiledConfig): SourcePolicy {
  const { schemes, directories, hosts } = config.deployment.http.sources;
  return { schemes, hosts: hosts.map(normalHost), directories: directories.map((dir) => (existsSync(dir) ? realpathSync(dir) : resolve(dir))) };
}

export async function startHttpApi(options: HttpApiOptions): Promise<HttpApi> {
  const { logger, metrics, queries, sources } = options;
  const host = options.host ?? '127.0.0.1';
  const app = Fastify({
    logger: false,
    bodyLimit: MAX_BODY_BYTES,
    // Unknown keys and wrong types are errors, not silently removed or converted (fastify's default).
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false } },
    // A malformed URL (a bad percent-escape) is the client's error, answered in the API's shape.
    frameworkErrors: (err, _request, reply) => void (reply as FastifyReply).code(400).send({ error: { code: ErrorCode.HttpBadRequest, message: err.message } }),
  });
  app.server.maxConnections = MAX_CONNECTIONS;
  const requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  // Idle sockets must not hold MAX_CONNECTIONS for long: one that has not sent its first
  // request's headers in time is closed (Node's headersTimeout is only checked every 30 s), and
  // an idle keep-alive one after 5 s (fastify keeps it 72 s).
  app.server.headersTimeout = requestTimeoutMs;
  app.server.keepAliveTimeout = 5_000;
  const silent = new WeakMap<Socket, NodeJS.Timeout>();
  app.server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => socket.destroy(), requestTimeoutMs).unref();
    silent.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });
  app.server.on('request', (request: IncomingMessage) => clearTimeout(silent.get(request.socket)));
  // A cross-site form can send text/plain without a preflight: only JSON bodies are read.
  app.removeContentTypeParser('text/plain');
  let ingest: Ingest | undefined;
  let live: LiveView | undefined;
  let hosts = new Set<string>();
  await app.register(swagger, {
    openapi: {
      info: { title: 'Panoptes', description: 'Video analytics: sources in, SQL-queryable results out. Requests that change state need `Authorization: Bearer <token>`.', version: '1' },
      components: { securitySchemes: { token: { type: 'http', scheme: 'bearer' } } },
    },
  });

  // Every route documents the error body it answers with.
  app.addHook('onRoute', (route) => {
    if (route.schema?.hide) return;
    route.schema = { ...route.schema, response: { 200: { description: 'OK' }, ...(route.schema?.response as object | undefined), '4xx': ERROR_BODY, '5xx': ERROR_BODY } };
  });

  // A body that never finishes is answered 408 and its connection closed, refused or not. Node's own
  // requestTimeout, which fastify passes on, did not end such a request (fastify 5, Node 20).
  app.addHook('onRequest', async (request, reply) => {
    if (request.raw.complete) return;
    const timer = setTimeout(() => {
      if (request.raw.complete) return;
      const socket = request.raw.socket;
      // Refused already (a 403 before the body came): the connection is closed, no second answer.
      if (reply.raw.headersSent) socket.destroy();
      else socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', () => socket.destroy());
    }, requestTimeoutMs).unref();
    reply.raw.once('close', () => {
      if (request.raw.complete) clearTimeout(timer);
    });
  });

  app.addHook('onRequest', async (request) => {
    const refusal = checkSite(request.headers, hosts);
    if (refusal) throw new PanoptesError(ErrorCode.HttpForbidden, refusal);
  });

  app.setErrorHandler((err: FastifyError | PanoptesError, _request, reply) => {
    const fastifyStatus = 'statusCode' in err && typeof err.statusCode === 'number' && err.statusCode < 500 ? err.statusCode : undefined;
    if (fastifyStatus !== undefined && !(err instanceof PanoptesError)) {
      // Fastify's own: a malformed URL or JSON body, a schema violation, a body too large or not JSON.
      return reply.code(fastifyStatus).send({ error: { code: ErrorCode.HttpBadRequest, message: redact(withAllowedValues(err as FastifyError)) } });
    }
    const error = serializeError(err);
    const status = STATUS[error.code] ?? 500;
    if (status === 500) logger.error({ err }, 'HTTP request failed');
    return reply.code(status).send({ error: { code: status === 500 ? 'PANOPTES_INTERNAL' : error.code, message: status === 500 ? 'internal error; see the server log' : redact(error.message) } });
  });
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: { code: ErrorCode.HttpBadRequest, message: `no ${request.method} ${request.url.split('?')[0]}; see the routes in docs/security.md` } });
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  app.get('/health', { schema: { summary: 'The process is up', tags: ['health'], response: answersWith('text/plain', 'ok') } }, async (_request, reply) => reply.type('text/plain').send('ok\n'));
  app.get('/status', { schema: { summary: "What this process serves: its version, and its pipeline's state (none in a `serve`)", tags: ['health'] } }, async () => ({
    version: PACKAGE_VERSION,
    pipeline: !sources ? 'none' : live ? 'running' : 'starting',
  }));
  app.get('/ready', { schema: { summary: 'The pipeline has started (503 before it has)', tags: ['health'], response: { ...answersWith('text/plain', 'ready'), 503: { description: 'starting', content: { 'text/plain': { schema: { type: 'string' } } } } } } }, async (_request, reply) =>
    live || !sources ? reply.type('text/plain').send('ready\n') : reply.code(503).type('text/plain').send('starting\n'),
  );
  if (metrics) app.get('/metrics', { schema: { summary: 'Prometheus metrics', tags: ['health'], response: answersWith('text/plain', 'Prometheus text format') } }, async (_request, reply) => reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()));
  const apps = options.apps ?? (() => Object.values(sources?.config.apps ?? {}));
  registerLiveRoutes(app, { apps, live: () => live, ...(options.snapshots ? { snapshots: options.snapshots } : {}) });
  if (options.dashboard) registerDashboard(app);

  if (sources) {
    const needsToken = async (request: FastifyRequest): Promise<void> => {
      const refusal = checkToken(request.headers.authorization, sources.token.token, sources.token.hint ?? sources.token.where);
      if (refusal) throw new PanoptesError(ErrorCode.HttpUnauthorized, refusal);
    };
    const running = (): Ingest => {
      if (!ingest) throw new PanoptesError(ErrorCode.Closed, 'this process runs no ingest worker (see --roles), or it has not started yet');
      return ingest;
    };
    const mutating = { tags: ['sources'], security: [{ token: [] }] };
    app.get('/sources', { schema: { summary: "The ingest worker's sources: state, frames published, errors", tags: ['sources'] } }, async () => ({ sources: running().metrics() }));
    app.post('/sources', { preHandler: needsToken, schema: { summary: 'Start a source, given as in a deployment file', ...mutating, body: { type: 'object' } } }, async (request, reply) => {
      checkRequestedSource(request.body, dirname(sources.config.file), sources.policy);
      const source = compileSource(JSON.stringify(request.body), sources.config, 'POST /sources');
      checkCompiledSource(source, sources.policy);
      if (source.path) await checkSourceHost(source.path, sources.policy);
      const worker = running();
      const active = worker.metrics().filter((s) => !['ended', 'failed', 'removed'].includes(s.state));
      if (active.some((s) => s.id === source.id)) {
        return reply.code(409).send({ error: { code: ErrorCode.ConfigInvalid, message: `source ${source.id} is already running; DELETE /sources/${source.id} first` } });
      }
      const { maxRunning } = sources.config.deployment.http.sources;
      if (active.length >= maxRunning) throw new PanoptesError(ErrorCode.HttpTooMany, `${active.length} sources are running, the most this deployment takes (http.sources.maxRunning); remove one first`);
      worker.add(source);
      return reply.code(201).send({ source: worker.metrics().find((s) => s.id === source.id) });
    });
    app.delete<{ Params: { id: string } }>('/sources/:id', { preHandler: needsToken, schema: { summary: 'Stop a source', ...mutating, params: { type: 'object', properties: { id: { type: 'string', maxLength: 100 } }, required: ['id'] } } }, async (request) => running().remove(request.params.id));
  }

  if (queries) {
    const slots = queries.slots ?? createQuerySlots();
    const answer = async (request: FastifyRequest, reply: FastifyReply, { sql, saved, format }: QueryRequest): Promise<FastifyReply> => {
      if (!sql === !saved) throw new PanoptesError(ErrorCode.HttpBadRequest, 'give sql=<SELECT ...> or saved=<app>.<query>, one of them');
      const socket = request.raw.socket;
      const result = await slots.run(() => queries.sink.query(saved ? queries.savedQuery(saved) : (sql ?? '')), () => socket.destroyed);
      if (format === 'columns') return reply.send(result);
      if (format === 'json') return reply.type('application/json; charset=utf-8').send(formatTable(result, 'json'));
      return reply.type(format === 'csv' ? 'text/csv; charset=utf-8' : 'text/plain; charset=utf-8').send(`${formatTable(result, format)}\n`);
    };
    const summary = "Run a read-only SQL query on the results (or an app's saved query): `json` gives an array of row objects, as the CLI's --format json; `columns` gives { columns, rows }";
    app.get<{ Querystring: QueryRequest }>('/query', { schema: { summary, tags: ['query'], querystring: querySchema } }, (request, reply) => answer(request, reply, request.query));
    app.post<{ Body: QueryRequest }>('/query', { schema: { summary, tags: ['query'], body: querySchema } }, (request, reply) => answer(request, reply, request.body));
  }

  if (options.path !== undefined) {
    await app.listen({ path: options.path });
    // A socket's clients name no port.
    hosts = new Set(['localhost']);
  } else {
    await app.listen({ port: options.port ?? 0, host });
    const address = app.server.address();
    hosts = allowedHosts(host, typeof address === 'object' && address ? address.port : (options.port ?? 0), options.allowedHosts);
  }
  const address = app.server.address();
  return {
    url: typeof address === 'object' && address ? `http://${host.includes(':') ? `[${host}]` : host}:${address.port}` : `unix:${options.path}`,
    attach(worker) {
      ingest = worker;
      metrics?.watchSources(() => worker.metrics());
    },
    attachLive(view) {
      live = view;
    },
    close: () => app.close(),
  };
}

export interface QuerySlots {
  /** Runs `task` in its turn; not at all where `gone` says its client has left by then. */
  run<T>(task: () => Promise<T>, gone: () => boolean): Promise<T>;
}

/** Runs at most `running` queries at once, `waiting` more queued in order; past those, refused (429). */
export function createQuerySlots({ running, waiting } = QUERY_SLOTS): QuerySlots {
  let busy = 0;
  const queue: { gone: () => boolean; resume: (turn: boolean) => void }[] = [];
  /** Waiters whose client has left give up their place, without a turn. */
  const prune = (): void => {
    for (const waiter of queue.filter((w) => w.gone())) {
      queue.splice(queue.indexOf(waiter), 1);
      waiter.resume(false);
    }
  };
  const leftEarly = (): PanoptesError => new PanoptesError(ErrorCode.HttpBadRequest, 'the client left before its query ran');
  return {
    async run(task, gone) {
      if (busy >= running) {
        prune();
        if (queue.length >= waiting) throw new PanoptesError(ErrorCode.HttpTooMany, `too many queries at once (${running} running, ${waiting} waiting); try again when one has ended`);
        if (!(await new Promise<boolean>((resume) => queue.push({ gone, resume })))) throw leftEarly();
      } else {
        busy += 1;
      }
      try {
        if (gone()) throw leftEarly();
        return await task();
      } finally {
        // The turn passes to the next in line whose client is still there, or is freed.
        prune();
        const next = queue.shift();
        if (next) next.resume(true);
        else busy -= 1;
      }
    },
  };
}

/** A schema's "must be equal to one of the allowed values", with the values. */
function withAllowedValues(err: FastifyError): string {
  const allowed = (err.validation ?? []).flatMap((v) => (v.keyword === 'enum' ? [(v.params as { allowedValues?: unknown[] }).allowedValues ?? []] : []));
  return allowed.length === 0 ? err.message : `${err.message}: ${allowed.map((values) => values.join(', ')).join('; ')}`;
}
