import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { sourcePolicy, startHttpApi } from '../../cli/http-api.js';
import { createMetrics } from '../../cli/metrics.js';
import { loadDeployment, projectRoot, silentLogger, type Stats } from '../../core/index.js';

const stats: Stats = {
  backend: 'b1',
  fromMs: 0,
  toMs: 1000,
  sessions: [{ session: 'centernet', arrivalRate: 31.5, queueLength: 3, batchSizes: [4, 8], latencyP50Ms: 80, latencyP99Ms: 190, dropped: 2, badRate: 0.05 }],
  edges: [{ app: 'traffic', from: 'detect', to: 'read', gamma: 1.5 }],
  apps: [{ app: 'traffic', framesRate: 12 }],
};

describe('metrics', () => {
  it('serves backends\' stats in the Prometheus text format, with counters that add up across intervals', async () => {
    const metrics = createMetrics();
    metrics.update(stats);
    metrics.update({ ...stats, fromMs: 1000, toMs: 2000 });
    metrics.watchSources(() => [
      { id: 'cam1', kind: 'live', state: 'streaming', origin: 'file', apps: ['traffic'], received: 250, sampled: 50, published: 49, analyzedHere: 7, lost: 25, reconnects: 1, downtimeMs: 1000, latencyP50Ms: 12, latencyP99Ms: 40 },
    ]);
    const config = loadDeployment(join(projectRoot(), 'configs/demo.yaml'));
    const server = await startHttpApi({ metrics, port: 0, logger: silentLogger(), sources: { config, policy: sourcePolicy(config), token: { token: 'a-test-token-of-some-length', where: 'the test' } } });
    try {
      const response = await fetch(`${server.url}/metrics`);
      expect(response.status).toBe(200);
      const text = await response.text();
      for (const line of [
        'panoptes_session_arrival_rate{backend="b1",session="centernet"} 31.5',
        'panoptes_session_queue_length{backend="b1",session="centernet"} 3',
        'panoptes_session_latency_p99_ms{backend="b1",session="centernet"} 190',
        'panoptes_session_bad_rate{backend="b1",session="centernet"} 0.05',
        'panoptes_session_batches_total{backend="b1",session="centernet"} 4',
        'panoptes_session_requests_run_total{backend="b1",session="centernet"} 24',
        'panoptes_session_dropped_total{backend="b1",session="centernet"} 4',
        'panoptes_edge_gamma{backend="b1",app="traffic",from="detect",to="read"} 1.5',
        'panoptes_app_frames_rate{backend="b1",app="traffic"} 12',
        'panoptes_source_frames_total{source="cam1",stage="received"} 250',
        'panoptes_source_frames_total{source="cam1",stage="lost"} 25',
        'panoptes_source_frames_total{source="cam1",stage="analyzed_here"} 7',
        'panoptes_source_latency_ms{source="cam1",quantile="0.99"} 40',
        'panoptes_source_reconnects_total{source="cam1"} 1',
      ]) {
        expect(text).toContain(line);
      }
      expect(text).toMatch(/^panoptes_process_cpu_seconds_total /m);
      expect(await (await fetch(`${server.url}/health`)).text()).toBe('ok\n');
      expect((await fetch(`${server.url}/nope`)).status).toBe(404);
      // No ingest worker attached: /sources says so instead of answering empty.
      expect((await fetch(`${server.url}/sources`)).status).toBe(503);
    } finally {
      await server.close();
    }
  });
});
