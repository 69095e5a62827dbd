/**
 * One SLO flow (Nexus §6.2): the plan gives each stage of a two-stage app its budget, and a
 * request at a stage must be done by the frame's capture time plus the budgets up to that stage.
 * The same arrivals go through a real embedded backend (real models, on a runtime paced to the
 * plan's profile so its timing is known) and through the scheduler's simulator: both drop the
 * same requests at the detector's stage deadline, one the app's whole SLO would have let run.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, createOnnxRuntime, type ModelRuntime } from '../../analyzers/index.js';
import { createAppLogic } from '../../apps/index.js';
import {
  appSpecSchema,
  createMemoryBus,
  dropContract,
  frameContract,
  loadModelZoo,
  parseConfig,
  planContract,
  projectRoot,
  resultRowContract,
  silentLogger,
  taskContract,
  Topics,
  type Drop,
  type Plan,
  type ResultRow,
} from '../../core/index.js';
import { linearProfile, profileLookup } from '../../scheduler/index.js';
import { runSimulation } from '../../scheduler/simulator/index.js';
import { waitFor } from '../conformance/wait-for.js';

const root = projectRoot();
/**
 * ℓ(1) of each stage, ms: what the plan's profiles say and what the paced runtime takes. Long
 * enough that the real models finish within them on a loaded 2-core machine.
 */
const DETECT_MS = 1000;
const READ_MS = 200;
/** Stage budgets: the detector's leaves 600 ms for decoding and queueing the first frame. */
const DETECT_BUDGET_MS = 1600;
const READ_BUDGET_MS = 1400;
const SLO_MS = DETECT_BUDGET_MS + READ_BUDGET_MS;
/** Frames: one, then the rest together this much later, while the first runs. */
const BURST = 3;
const LATER_MS = 50;

const signs = createAppLogic(
  parseConfig(
    appSpecSchema,
    `name: signs
sloMs: ${SLO_MS}
nodes: [{ id: find-text, model: ppocr-det }, { id: read-text, model: ppocr-rec, params: { minScore: 0.5 } }]
edges: [{ from: frames, to: find-text }, { from: find-text, to: read-text, filter: { classes: [text], minScore: 0.6 } }]
`,
    'signs.yaml',
  ),
);
const profiles = [
  linearProfile({ model: 'ppocr-det', alphaMs: 0, betaMs: DETECT_MS, maxBatch: 1 }),
  linearProfile({ model: 'ppocr-rec', alphaMs: 0, betaMs: READ_MS, maxBatch: 1 }),
];

/** The real models, each run taking at least its profile's ℓ(b): a device whose timing the test knows. */
function pacedRuntime(inner: ModelRuntime, msOf: Readonly<Record<string, number>>): ModelRuntime {
  return {
    name: `paced ${inner.name}`,
    lanes: inner.lanes,
    close: () => inner.close(),
    async load(model) {
      const loaded = await inner.load(model);
      const ms = msOf[model.name] ?? 0;
      return {
        name: loaded.name,
        inputNames: loaded.inputNames,
        outputNames: loaded.outputNames,
        dispose: () => loaded.dispose(),
        async run(feeds) {
          const started = performance.now();
          const outputs = await loaded.run(feeds);
          await sleep(Math.max(0, ms - (performance.now() - started)));
          return outputs;
        },
      };
    },
  };
}

const plan = (backend: string): Plan => ({
  epoch: 1,
  createdAtMs: Date.now(),
  sessions: [
    { id: 'ppocr-det@900', model: 'ppocr-det', sloMs: DETECT_BUDGET_MS, nodes: [{ app: 'signs', node: 'find-text' }], latencyMs: [DETECT_MS], overheadMs: 0 },
    { id: 'ppocr-rec@500', model: 'ppocr-rec', sloMs: READ_BUDGET_MS, nodes: [{ app: 'signs', node: 'read-text' }], latencyMs: [READ_MS], overheadMs: 0 },
  ],
  backends: [{ backend, dutyCycleMs: DETECT_MS + READ_MS, sessions: [{ session: 'ppocr-det@900', batch: 1 }, { session: 'ppocr-rec@500', batch: 1 }] }],
  routing: [
    { session: 'ppocr-det@900', topic: Topics.frames, weights: { [backend]: 1 } },
    { session: 'ppocr-rec@500', topic: Topics.tasks('ppocr-rec'), weights: { [backend]: 1 } },
  ],
});

describe('stage deadlines from the plan', () => {
  const bus = createMemoryBus();
  const runtime = pacedRuntime(createOnnxRuntime({ logger: silentLogger() }), { 'ppocr-det': DETECT_MS, 'ppocr-rec': READ_MS });
  const backend = createBackend({ id: 'stages', bus, runtime, models: loadModelZoo(), apps: [signs], appsForSource: () => ['signs'], batch: 1, logger: silentLogger() });
  const rows: ResultRow[] = [];
  const drops: Drop[] = [];
  let tasks = 0;
  const hud = sharp(join(root, 'test/fixtures/ocr/hud.png')).jpeg().toBuffer();
  const publish = async (source: string, seqs: number[]) => {
    const [jpeg, captureTimeMs] = [await hud, Date.now()];
    await bus.producer().send(Topics.frames, seqs.map((seq) => ({ key: source, value: frameContract.encode({ source, seq, captureTimeMs, ptsMs: 0, width: 640, height: 360, jpeg }) })));
  };

  beforeAll(async () => {
    await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.tasks('ppocr-rec'), Topics.backfillTasks('ppocr-rec'), Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead].map((name) => ({ name, partitions: 1 })));
    await bus.consumer({ groupId: 'observer', topics: [Topics.results, Topics.drops, Topics.tasks('ppocr-rec')] }).run(async (batch) => {
      for (const m of batch.messages) {
        if (batch.topic === Topics.results) rows.push(resultRowContract.decode(m.value));
        else if (batch.topic === Topics.drops) drops.push(dropContract.decode(m.value));
        else {
          const task = taskContract.decode(m.value);
          if (task.source === 'hud' && task.frameSeq === 0) tasks += 1;
        }
      }
    });
    await backend.start();
    await bus.producer().send(Topics.plan, [{ key: 'plan', value: planContract.encode(plan('stages')) }]);
    await waitFor(() => backend.status().planEpoch === 1, 'the plan followed');
    // A first frame through both stages, so the timed ones do not pay for loading the models.
    await publish('warm-up', [0]);
    await waitFor(() => rows.some((r) => r.fields.node === 'read-text'), 'the warm-up frame read', { timeoutMs: 60_000 });
    await sleep(READ_MS * 3);
    rows.length = 0;
    drops.length = 0;
  }, 120_000);
  afterAll(async () => {
    await backend.close();
    await runtime.close();
    await bus.close();
  });

  it('drops at the detector the frames that would spend the reader\'s budget, as the simulator does', async () => {
    await publish('hud', [0]);
    await sleep(LATER_MS);
    await publish('hud', Array.from({ length: BURST - 1 }, (_, i) => i + 1));
    await waitFor(() => drops.length === BURST - 1 && rows.some((r) => r.fields.node === 'read-text'), 'the frames handled');
    await sleep(READ_MS * 3);

    // The first frame runs (0–1000 ms); the next one, captured 50 ms later, would end at 2000 ms:
    // after its detector stage deadline (1650 ms), though within the app's SLO (3050 ms). It and
    // the one behind it are dropped, naming the stage.
    expect(drops.map((d) => [d.what, d.why, d.frameSeq]).sort(), JSON.stringify(drops)).toEqual([['frame', 'deadline', 1], ['frame', 'deadline', 2]]);
    expect(drops[0]!.detail).toContain('stage signs/find-text');
    // The first frame's regions were read within the reader's own budget.
    expect(tasks).toBeGreaterThan(0);
    const read = rows.filter((r) => r.fields.node === 'read-text' && r.fields.kind === 'text');
    expect(read.length).toBeGreaterThan(0);
    expect(backend.status().late, JSON.stringify(backend.status())).toBe(0);

    // The simulator, given the same arrivals, the plan's sessions and profiles, and the fan-out
    // the backend measured, makes the same decisions.
    const simulated = runSimulation({
      sessions: [
        { id: 'find-text', model: 'ppocr-det', sloMs: DETECT_BUDGET_MS, arrivals: { kind: 'trace', timesMs: [0, ...Array<number>(BURST - 1).fill(LATER_MS)] }, children: [{ session: 'read-text', gamma: tasks }] },
        { id: 'read-text', model: 'ppocr-rec', sloMs: READ_BUDGET_MS },
      ],
      profileOf: profileLookup(profiles),
      plan: [
        {
          id: 'gpu-0',
          dedicated: false,
          dutyCycleMs: DETECT_MS + READ_MS,
          sessions: [
            { id: 'find-text', model: 'ppocr-det', sloMs: DETECT_BUDGET_MS, rate: 1, batch: 1 },
            { id: 'read-text', model: 'ppocr-rec', sloMs: READ_BUDGET_MS, rate: 1, batch: 1 },
          ],
        },
      ],
      drop: 'early',
      durationMs: 1000,
      seed: 1,
    });
    expect(simulated.bySession['find-text']).toEqual({ requests: BURST, good: 1, late: 0, dropped: BURST - 1 });
    // The dropped frames' regions never exist in the backend; the simulator counts them as dropped with their parent.
    expect(simulated.bySession['read-text']).toEqual({ requests: BURST * tasks, good: tasks, late: 0, dropped: (BURST - 1) * tasks });
  });
});
