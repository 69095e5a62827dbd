import { createServer, type Server } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { Stats } from '../core/index.js';

/**
 * Backends' stats as Prometheus metrics: the same figures each second's `Stats` carries,
 * labelled by backend and session, plus the process's own (CPU, memory, event-loop lag).
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'panoptes_' });
  const labelNames = ['backend', 'session'] as const;
  const gauge = (name: string, help: string) => new Gauge({ name: `panoptes_session_${name}`, help, labelNames, registers: [registry] });
  const counter = (name: string, help: string) => new Counter({ name: `panoptes_session_${name}`, help, labelNames, registers: [registry] });
  const arrivalRate = gauge('arrival_rate', 'Requests per second that arrived in the last interval');
  const queueLength = gauge('queue_length', 'Requests waiting');
  const latencyP50 = gauge('latency_p50_ms', 'Median latency in the session (queue, run, decode) over the last interval, ms');
  const latencyP99 = gauge('latency_p99_ms', '99th percentile latency in the session over the last interval, ms');
  const badRate = gauge('bad_rate', 'Share of the last interval\'s requests dropped or late, 0..1');
  const batches = counter('batches_total', 'Batches run');
  const images = counter('requests_run_total', 'Requests run in batches');
  const dropped = counter('dropped_total', 'Requests dropped because they could not meet their deadline');
  const gamma = new Gauge({ name: 'panoptes_edge_gamma', help: 'Fan-out: child tasks per parent request over the last interval', labelNames: ['backend', 'app', 'from', 'to'], registers: [registry] });
  const framesRate = new Gauge({ name: 'panoptes_app_frames_rate', help: 'Frames per second taken in for the app', labelNames: ['backend', 'app'], registers: [registry] });

  return {
    registry,
    update(stats: Stats): void {
      for (const s of stats.sessions) {
        const labels = { backend: stats.backend, session: s.session };
        arrivalRate.set(labels, s.arrivalRate);
        queueLength.set(labels, s.queueLength);
        latencyP50.set(labels, s.latencyP50Ms);
        latencyP99.set(labels, s.latencyP99Ms);
        badRate.set(labels, s.badRate);
        batches.inc(labels, s.batchSizes.length);
        images.inc(labels, s.batchSizes.reduce((a, b) => a + b, 0));
        dropped.inc(labels, s.dropped);
      }
      for (const e of stats.edges) gamma.set({ backend: stats.backend, app: e.app, from: e.from, to: e.to }, e.gamma);
      for (const a of stats.apps ?? []) framesRate.set({ backend: stats.backend, app: a.app }, a.framesRate);
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** `GET /metrics` (Prometheus text format) and `GET /health` on host:port. */
export async function serveMetrics(metrics: Metrics, port: number, host = '127.0.0.1'): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (request.method === 'GET' && path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (err: unknown) => response.writeHead(500).end(String(err)),
      );
    } else if (request.method === 'GET' && path === '/health') {
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('GET /metrics or /health\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  return {
    url: `http://${host}:${bound}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
