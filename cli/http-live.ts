/**
 * The HTTP API's view of the running pipeline (live-view.ts): the apps and their saved queries,
 * the plans, each source's newest analyzed frame with its boxes drawn, and the live event stream
 * (server-sent events). All reads: nothing here changes state.
 */
import { readFile, realpath } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { join, sep } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ErrorCode, PanoptesError, type AppSpec } from '../core/index.js';
import { annotatedJpeg } from '../analyzers/index.js';
import type { LiveEvent, LiveView } from './live-view.js';

/** Event streams open at once; more are refused rather than left to pile up. */
const MAX_STREAMS = 16;
/** A comment line this often keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;
/** The counts' event, this often. */
const TICK_MS = 1_000;
/** A stream whose client reads less than this behind is ended rather than buffered for. */
const MAX_UNREAD_BYTES = 1024 * 1024;

/** A route's answer that is not JSON, for the OpenAPI document. */
export const answersWith = (type: string, description: string) => ({ 200: { description, content: { [type]: { schema: { type: 'string' } } } } }) as const;

const sourceParams = { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]*$', maxLength: 100 } }, required: ['id'] } as const;

export function registerLiveRoutes(app: FastifyInstance, options: { apps: () => readonly AppSpec[]; live: () => LiveView | undefined; snapshots?: string }): void {
  const running = (): LiveView => {
    const view = options.live();
    if (!view) throw new PanoptesError(ErrorCode.Closed, 'this process runs no pipeline (a `serve`), or it has not started yet');
    return view;
  };

  app.get('/apps', { schema: { summary: 'The apps: their DAG nodes, latency SLO and saved queries', tags: ['apps'] } }, async () => ({
    apps: options.apps().map((spec) => ({
      name: spec.name,
      description: spec.description,
      sloMs: spec.sloMs,
      nodes: spec.nodes.map((n) => ({ id: n.id, model: n.model })),
      edges: spec.edges.map((e) => ({ from: e.from, to: e.to })),
      queries: Object.entries(spec.queries).map(([name, sql]) => ({ name: `${spec.name}.${name}`, sql })),
    })),
  }));

  app.get('/plan', { schema: { summary: "The scheduler's newest plan: sessions, their batches and backends' duty cycles", tags: ['plan'] } }, async () => {
    const plan = running().plans()[0];
    if (!plan) throw new PanoptesError(ErrorCode.PlanNotFound, 'no plan yet: the deployment runs no scheduler (no `scheduler:` section), or its first epoch has not ended');
    return plan;
  });
  app.get('/plan/history', { schema: { summary: 'The plans this process has seen, newest first (older ones: the `plans` table)', tags: ['plan'] } }, async () => ({ plans: running().plans() }));

  app.get<{ Params: { id: string } }>('/sources/:id/frame', { schema: { summary: "The source's newest analyzed frame: its size and the objects found on it", tags: ['sources'], params: sourceParams } }, async (request) => {
    const { jpeg: _jpeg, ...frame } = latestFrame(running(), request.params.id);
    return frame;
  });
  // Drawn once per frame and objects, however many dashboards ask; kept as long as the live view keeps the frame.
  const drawn = new WeakMap<object, { objects: number; jpeg: Promise<Buffer> }>();
  app.get<{ Params: { id: string } }>('/sources/:id/frame.jpg', { schema: { summary: "The source's newest analyzed frame as a JPEG, with its objects' boxes and labels drawn", tags: ['sources'], params: sourceParams, response: answersWith('image/jpeg', 'the frame, drawn on') } }, async (request, reply) => {
    const frame = latestFrame(running(), request.params.id);
    let picture = drawn.get(frame);
    if (picture?.objects !== frame.objects.length) {
      drawn.set(frame, (picture = { objects: frame.objects.length, jpeg: annotatedJpeg(frame.jpeg, frame.objects) }));
      picture.jpeg.catch(() => drawn.delete(frame));
    }
    return reply.type('image/jpeg').header('cache-control', 'no-store').send(await picture.jpeg);
  });

  const snapshots = options.snapshots;
  if (snapshots) {
    const plainName = { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]*$', maxLength: 200 } as const;
    const params = { type: 'object', properties: { app: plainName, source: plainName, file: { type: 'string', pattern: '^\\d+-[0-9a-f]{16}\\.jpg$' } }, required: ['app', 'source', 'file'] } as const;
    app.get<{ Params: { app: string; source: string; file: string } }>('/snapshots/:app/:source/:file', { schema: { summary: "An event's picture: the path in its row's `snapshot` column", tags: ['events'], params, response: answersWith('image/jpeg', 'the picture') } }, async (request, reply) => {
      const { app: appName, source, file } = request.params;
      const jpeg = await readSnapshot(snapshots, `${appName}/${source}/${file}`);
      if (!jpeg) throw new PanoptesError(ErrorCode.SourceNotFound, `no picture ${appName}/${source}/${file} (removed with its rows, or never taken)`);
      return reply.type('image/jpeg').header('cache-control', 'private, max-age=86400').send(jpeg);
    });
  }

  const streams = new Set<ServerResponse>();
  // A server closing ends its streams: they would hold the process open otherwise.
  app.addHook('preClose', async () => {
    for (const res of streams) res.end();
  });
  app.get('/events', { schema: { summary: 'Live events as server-sent events: stats, drop, event, frame, plan, and counts every second', tags: ['events'], response: answersWith('text/event-stream', 'events as they happen') } }, (_request, reply) => {
    const view = running();
    if (streams.size >= MAX_STREAMS) throw new PanoptesError(ErrorCode.HttpTooMany, `${MAX_STREAMS} event streams are open already; close one first`);
    streams.add(reply.raw);
    openStream(reply, view, () => streams.delete(reply.raw));
  });
}

/** A picture's bytes, when the path names a file inside the folder (links out of it are not followed). */
async function readSnapshot(root: string, path: string): Promise<Buffer | undefined> {
  try {
    const [folder, file] = await Promise.all([realpath(root), realpath(join(root, path))]);
    return file.startsWith(`${folder}${sep}`) ? await readFile(file) : undefined;
  } catch {
    return undefined;
  }
}

function latestFrame(view: LiveView, source: string) {
  const frame = view.latestFrame(source);
  if (!frame) throw new PanoptesError(ErrorCode.SourceNotFound, `no analyzed frame of source ${source} yet`);
  return frame;
}

/** Writes the view's events to the response as they come, until the client goes. */
function openStream(reply: FastifyReply, view: LiveView, closed: () => void): void {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  const send = (type: string, data: unknown): void => {
    // A client that stops reading is let go, not buffered for.
    if (res.writableLength > MAX_UNREAD_BYTES) return void res.destroy();
    res.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  const unsubscribe = view.subscribe((event: LiveEvent) => {
    const { type, ...data } = event;
    send(type, data);
  });
  const tick = setInterval(() => send('counts', view.counts()), TICK_MS);
  const keepalive = setInterval(() => res.writableLength <= MAX_UNREAD_BYTES && res.write(': keepalive\n\n'), KEEPALIVE_MS);
  send('counts', view.counts());
  res.on('close', () => {
    clearInterval(tick);
    clearInterval(keepalive);
    unsubscribe();
    closed();
  });
}
