/**
 * The dashboard: plain static files from `web/` and the charting library (uPlot) from its
 * package, served at fixed paths (no path from a request ever reaches the file system). The page
 * reads only the HTTP API.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { projectRoot } from '../core/index.js';

/** Everything the page may load comes from this server; it may not be framed by another site. */
const CSP = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

export function registerDashboard(app: FastifyInstance): void {
  const web = join(projectRoot(), 'web');
  const uplot = dirname(createRequire(join(projectRoot(), 'package.json')).resolve('uplot'));
  const files: Record<string, { file: string; type: string }> = {
    '/': { file: join(web, 'index.html'), type: 'text/html; charset=utf-8' },
    '/dashboard.js': { file: join(web, 'dashboard.js'), type: 'text/javascript; charset=utf-8' },
    '/dashboard.css': { file: join(web, 'dashboard.css'), type: 'text/css; charset=utf-8' },
    '/vendor/uplot.js': { file: join(uplot, 'uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
    '/vendor/uplot.css': { file: join(uplot, 'uPlot.min.css'), type: 'text/css; charset=utf-8' },
  };
  for (const [path, { file, type }] of Object.entries(files)) {
    const body = readFileSync(file);
    app.get(path, { schema: { hide: true } }, async (_request, reply) =>
      reply.type(type).header('content-security-policy', CSP).header('x-content-type-options', 'nosniff').header('cache-control', 'no-cache').send(body),
    );
  }
}
