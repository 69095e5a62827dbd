// The Panoptes dashboard. Plain script, no build step; it reads only the HTTP API: /sources,
// /apps, /query (charts are SQL on the results), /events (live) and /sources/:id/frame.jpg.
// Everything that came from a request is shown as text, never as markup.
'use strict';

const CHART_REFRESH_MS = 5000;
const SOURCES_REFRESH_MS = 2000;
const FRAME_REFRESH_MS = 1000;
const EVENTS_KEPT = 50;
const WINDOW = 'at > now() - INTERVAL 15 MINUTE';
const COLOURS = ['#4cc9f0', '#ffd60a', '#f72585', '#80ed99', '#ff8500', '#b5179e', '#00f5d4', '#e9ecef'];

const $ = (id) => document.getElementById(id);

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

async function api(path, init) {
  const response = await fetch(path, init);
  const body = response.headers.get('content-type')?.includes('json') ? await response.json() : await response.text();
  if (!response.ok) throw new Error(body?.error?.message ?? `${response.status} ${path}`);
  return body;
}

const query = (sql) => api('/query', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sql, format: 'columns' }) });

// ---- charts: one series per key, on the times every row shares ----

/** uPlot's aligned data from rows of { t, key, value }: [times, series...] with null where a key has no row. */
function pivot(rows) {
  const times = [...new Set(rows.map((r) => Number(r.t)))].sort((a, b) => a - b);
  const keys = [...new Set(rows.map((r) => String(r.key)))].sort();
  const at = new Map(times.map((t, i) => [t, i]));
  const series = keys.map(() => times.map(() => null));
  for (const r of rows) series[keys.indexOf(String(r.key))][at.get(Number(r.t))] = Number(r.value);
  return { keys, data: [times, ...series] };
}

const charts = new Map();

/** Each series on top of the ones before it (gaps count as 0), for a stacked chart. */
function stack([times, ...series]) {
  const sums = times.map(() => 0);
  return [times, ...series.map((values) => values.map((v, i) => (sums[i] += v ?? 0)))];
}

/** Draws (or redraws) the chart in `id` from rows of { t, key, value }. */
function drawChart(id, rows, { yLabel, range, bars, stacked } = {}) {
  const host = $(id);
  const pivoted = pivot(rows);
  // Stacked areas go top one first, so that each lower one is painted over the one above it.
  const keys = stacked ? [...pivoted.keys].reverse() : pivoted.keys;
  const data = stacked ? ((d) => [d[0], ...d.slice(1).reverse()])(stack(pivoted.data)) : pivoted.data;
  const shape = keys.join('\n');
  let entry = charts.get(id);
  if (entry && entry.shape !== shape) {
    entry.plot.destroy();
    charts.delete(id);
    entry = undefined;
  }
  if (keys.length === 0) {
    if (!host.querySelector('.empty')) host.replaceChildren(element('p', 'no data yet', 'empty'));
    return;
  }
  if (entry) return entry.plot.setData(data);
  host.replaceChildren();
  const width = Math.max(300, host.clientWidth || 500);
  const paths = bars ? uPlot.paths.bars({ size: [0.6, 24] }) : undefined;
  const plot = new uPlot(
    {
      width,
      height: 220,
      // One point alone gets a minute around it, not uPlot's guess of years.
      scales: { x: { time: true, range: (_u, min, max) => (max - min < 10 ? [min - 30, max + 30] : [min, max]) }, y: { range: range ?? ((_u, _min, max) => [0, Math.max(1, max * 1.1)]) } },
      axes: [{ stroke: '#8b9bab', grid: { stroke: '#243140' } }, { label: yLabel, stroke: '#8b9bab', grid: { stroke: '#243140' } }],
      series: [
        {},
        ...keys.map((key, i) => ({ label: key, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: false, ...(paths ? { paths } : {}), ...(paths || stacked ? { fill: `${COLOURS[i % COLOURS.length]}${stacked ? 'cc' : '55'}` } : {}) })),
      ],
    },
    data,
    host,
  );
  charts.set(id, { plot, shape });
}

async function refreshCharts() {
  const step = 'toUnixTimestamp(toStartOfInterval(at, INTERVAL 5 SECOND))';
  const jobs = [
    query(`SELECT ${step} AS t, app AS key, if(sum(requests) = 0, 1, 1 - sum(late + dropped) / sum(requests)) AS value FROM app_stats WHERE ${WINDOW} GROUP BY t, key ORDER BY t`).then((r) =>
      drawChart('slo-chart', r.rows, { yLabel: 'on time', range: [0, 1] }),
    ),
    query(`SELECT ${step} AS t, concat(stage, ': ', reason) AS key, count() AS value FROM drops WHERE ${WINDOW} GROUP BY t, key ORDER BY t`).then((r) => drawChart('drops-chart', r.rows, { yLabel: 'drops', bars: true })),
    // Nexus' Fig. 13: requests per session stacked, the backends serving them, the bad rate (the SLO chart).
    query(`SELECT ${step} AS t, session AS key, sum(arrival_rate) * uniqExact(backend) / count() AS value FROM session_stats WHERE ${WINDOW} AND stream = '' GROUP BY t, key ORDER BY t`).then((r) =>
      drawChart('sessions-chart', r.rows, { yLabel: 'requests/s', stacked: true }),
    ),
    query(`SELECT ${step} AS t, 'backends serving' AS key, uniqExact(backend) AS value FROM session_stats WHERE ${WINDOW} GROUP BY t ORDER BY t`).then((r) =>
      drawChart('backends-chart', r.rows, { yLabel: 'backends' }),
    ),
    query('SELECT epoch, backend, any(duty_cycle_ms) AS duty, groupArray(concat(session, \' ×\', toString(batch))) AS sessions FROM plans GROUP BY epoch, backend ORDER BY epoch DESC, backend LIMIT 8').then((r) => {
      $('plan').textContent =
        r.rows.length === 0 ? 'no plans: this deployment runs no scheduler' : r.rows.map((p) => `epoch ${p.epoch}, ${p.backend}: duty cycle ${Number(p.duty).toFixed(0)} ms, ${p.sessions.join(', ')}`).join(' · ');
    }),
  ];
  const failed = (await Promise.allSettled(jobs)).find((j) => j.status === 'rejected');
  if (failed) $('query-error').textContent = `charts: ${failed.reason.message}`;
}

// ---- sources and their newest frames ----

const cards = new Map();

async function refreshSources() {
  let sources;
  try {
    sources = (await api('/sources')).sources;
  } catch {
    return; // a process that runs no pipeline (serve): no sources to show
  }
  const box = $('sources');
  if (sources.length > 0) box.querySelector('.empty')?.remove();
  for (const source of sources) {
    let card = cards.get(source.id);
    if (!card) {
      const root = element('div', undefined, 'card');
      root.dataset.source = source.id;
      const image = element('img');
      image.alt = `newest frame of ${source.id}`;
      const line = element('p');
      const name = element('strong', source.id);
      const state = element('span', '', 'state');
      line.append(name, state);
      root.append(image, line);
      box.append(root);
      card = { image, state, loaded: 0 };
      cards.set(source.id, card);
    }
    card.state.textContent = `${source.state} · ${source.published} frames`;
  }
}

/** Shows the source's newest frame, at most once a second per source. */
function showFrame(source) {
  const card = cards.get(source);
  if (!card || Date.now() - card.loaded < FRAME_REFRESH_MS) return;
  card.loaded = Date.now();
  card.image.src = `/sources/${encodeURIComponent(source)}/frame.jpg?t=${card.loaded}`;
}

// ---- live events ----

/** A line in the live events, with the event's picture when it has one. */
function addEvent(text, className, snapshot) {
  const list = $('events');
  const item = element('li', undefined, className);
  item.append(element('time', new Date().toLocaleTimeString()), document.createTextNode(text));
  if (snapshot) {
    const link = element('a');
    link.href = `/snapshots/${snapshot.split('/').map(encodeURIComponent).join('/')}`;
    link.target = '_blank';
    const picture = element('img', undefined, 'snapshot');
    picture.src = link.href;
    picture.alt = text;
    link.append(picture);
    item.append(link);
  }
  list.prepend(item);
  while (list.children.length > EVENTS_KEPT) list.lastChild.remove();
}

/** A row of the `events` table in a few words. */
function describeEvent(f) {
  const object = `${f.class || 'object'}${f.track_id ? ` #${f.track_id}` : ''}`;
  if (f.event === 'track') return `${object} left the picture after ${(Number(f.duration_ms) / 1000).toFixed(1)} s`;
  if (f.event === 'line_crossing') return `${object} crossed ${f.name}${f.direction ? ` (${f.direction})` : ''}`;
  if (f.event === 'dwell') return `${object} stayed ${(Number(f.duration_ms) / 1000).toFixed(1)} s in ${f.name}`;
  if (f.event === 'change') return `${f.name}: ${f.previous} → ${f.value}`;
  return `${f.event} ${f.name}`;
}

function showCounts({ rows, drops }) {
  const shown = { frames: rows.frames ?? 0, detections: rows.detections ?? 0, recognitions: rows.recognitions ?? 0, events: rows.events ?? 0, drops };
  $('counts').replaceChildren(
    ...Object.entries(shown).map(([name, n]) => {
      const pair = element('div');
      pair.append(element('dt', name), element('dd', n.toLocaleString()));
      return pair;
    }),
  );
}

function listen() {
  const status = $('status');
  const stream = new EventSource('/events');
  stream.onopen = () => {
    status.textContent = 'live';
    status.className = 'pill live';
  };
  stream.onerror = () => {
    status.textContent = 'not running: results only';
    status.className = 'pill down';
  };
  const on = (type, handle) => stream.addEventListener(type, (e) => handle(JSON.parse(e.data)));
  on('counts', showCounts);
  on('frame', ({ source }) => showFrame(source));
  on('event', ({ app, source, fields }) => addEvent(`${app} · ${source}: ${describeEvent(fields)}`, undefined, fields.snapshot));
  on('drop', ({ drop }) => addEvent(`drop · ${drop.source ?? ''} at ${drop.where}: ${drop.why}`, 'drop'));
  on('plan', ({ epoch, backends }) => addEvent(`plan epoch ${epoch}: ${backends.map((b) => `${b.backend} ${b.sessions.length} sessions`).join(', ')}`));
}

// ---- queries ----

function showResult({ columns, rows }) {
  const table = $('query-result');
  const head = element('tr');
  for (const c of columns) head.append(element('th', c.name));
  const numeric = columns.map((c) => /Int|Float|Decimal/.test(c.type));
  const largest = columns.map((c, i) => (numeric[i] ? Math.max(...rows.map((r) => Math.abs(Number(r[c.name]) || 0)), 0) : 0));
  const body = rows.map((row) => {
    const tr = element('tr');
    columns.forEach((c, i) => {
      const value = row[c.name];
      const text = typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
      if (!numeric[i]) return tr.append(element('td', text));
      // Numbers get a bar: the column drawn as a chart in place.
      const td = element('td', undefined, 'number');
      const bar = element('span', undefined, 'bar');
      bar.style.width = `${largest[i] ? (100 * Math.abs(Number(value))) / largest[i] : 0}%`;
      td.append(bar, element('span', text, 'value'));
      tr.append(td);
    });
    return tr;
  });
  table.replaceChildren(head, ...body);
}

async function loadSavedQueries() {
  const { apps } = await api('/apps');
  const select = $('saved');
  for (const { name, sql } of apps.flatMap((a) => a.queries)) {
    const option = element('option', name);
    option.value = sql;
    select.append(option);
  }
  select.addEventListener('change', () => {
    if (select.value) $('sql').value = select.value;
  });
}

$('query-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  $('query-error').textContent = '';
  try {
    showResult(await query($('sql').value));
  } catch (err) {
    $('query-error').textContent = err.message;
  }
});

async function start() {
  const { pipeline } = await api('/status');
  if (pipeline === 'none') {
    // A `serve`: the stored results only.
    $('status').textContent = 'results only';
    $('sources').replaceChildren(element('p', 'this process runs no pipeline; start one with `panoptes run <deployment> --http-port <port>`', 'empty'));
  } else {
    listen();
    refreshSources();
    setInterval(refreshSources, SOURCES_REFRESH_MS);
  }
  loadSavedQueries().catch((err) => ($('query-error').textContent = `apps: ${err.message}`));
  refreshCharts();
  setInterval(refreshCharts, CHART_REFRESH_MS);
}

start().catch((err) => ($('query-error').textContent = err.message));
