import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { Stats } from '../core/index.js';
import type { SourceMetrics } from '../ingest/index.js';

/**
 * Backends' stats as Prometheus metrics: the same figures each second's `Stats` carries,
 * labelled by backend and session; the sources of this process's ingest worker, read at each
 * scrape; and the process's own (CPU, memory, event-loop lag).
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

  let sources: (() => SourceMetrics[]) | undefined;
  /** A gauge filled at each scrape from the sources' figures: `values` gives each source's labels and values. */
  const sourceGauge = (name: string, help: string, extraLabel: string | undefined, values: (s: SourceMetrics) => [string | undefined, number | undefined][]) =>
    new Gauge({
      name,
      help,
      labelNames: extraLabel ? ['source', extraLabel] : ['source'],
      registers: [registry],
      collect() {
        this.reset();
        for (const s of sources?.() ?? []) {
          for (const [label, value] of values(s)) {
            if (value !== undefined) this.set(extraLabel ? { source: s.id, [extraLabel]: label! } : { source: s.id }, value);
          }
        }
      },
    });
  sourceGauge(
    'panoptes_source_frames_total',
    'Frames of a source by stage: received (decoded), sampled, published, lost, analyzed_here (its first model run by the ingest worker)',
    'stage',
    (s) => [['received', s.received], ['sampled', s.sampled], ['published', s.published], ['lost', s.lost], ['analyzed_here', s.analyzedHere]],
  );
  sourceGauge('panoptes_source_latency_ms', 'Capture-to-publish latency of a source over its last frames, ms', 'quantile', (s) => [['0.5', s.latencyP50Ms], ['0.99', s.latencyP99Ms]]);
  sourceGauge('panoptes_source_reconnects_total', 'Connections a live source has lost', undefined, (s) => [[undefined, s.reconnects]]);

  return {
    registry,
    /** Where the source figures come from (the ingest worker, once it runs). */
    watchSources(provider: () => SourceMetrics[]): void {
      sources = provider;
    },
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
