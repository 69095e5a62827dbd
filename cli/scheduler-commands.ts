import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { z } from 'zod';
import { createOnnxRuntime, cpuDeviceName, decodeJpeg, findPrefixFamilies, profileModel } from '../analyzers/index.js';
import { ErrorCode, loadConfigFile, loadModelZoo, PanoptesError, projectRoot, type Logger, type ResolvedModel } from '../core/index.js';
import { batchProfileSchema, downgradeToFit, EXPERIMENT_NAMES, loadProfiles, profileLookup, profileWarnings, warningsFor, runExperiments, squishyBinPacking, zooVariants, type BatchProfile, type Packing } from '../scheduler/index.js';
import { formatTable } from './output.js';
import { defaultModelThreads } from './run-setup.js';

/** `panoptes plan --sessions`: what the scheduler is asked to place. */
const sessionsFileSchema = z
  .array(
    z.strictObject({
      id: z.string().min(1),
      model: z.string().min(1),
      /** Latency SLO of each request, ms. */
      sloMs: z.number().positive(),
      /** Requests per second. */
      rate: z.number().nonnegative(),
    }),
  )
  .refine((sessions) => new Set(sessions.map((s) => s.id)).size === sessions.length, 'session ids must be unique');

function parseInteger(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

function parseCount(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a whole number, 0 or more');
  return n;
}

/** The images a profile runs on: the given files, else the project's test images (real footage stills). */
async function profileImages(files: readonly string[] | undefined): Promise<Awaited<ReturnType<typeof decodeJpeg>>[]> {
  const dir = join(projectRoot(), 'test/fixtures/images');
  const paths = files?.length ? files.map((f) => resolve(f)) : readdirSync(dir).filter((f) => f.endsWith('.jpg')).map((f) => join(dir, f));
  return Promise.all(paths.map((path) => decodeJpeg(readFileSync(path))));
}

/** A zoo model by name, or the prefix family `a+b+…` of zoo models that share a prefix. */
async function zooModel(name: string, zoo: Readonly<Record<string, ResolvedModel>>): Promise<ResolvedModel> {
  const members = name.split('+');
  const twice = members.filter((m, i) => members.indexOf(m) !== i);
  if (twice.length > 0) throw new PanoptesError(ErrorCode.ConfigInvalid, `"${[...new Set(twice)].join('", "')}" named more than once in ${name}; a family's members are different models`);
  const unknown = members.filter((m) => !zoo[m]);
  if (unknown.length > 0) throw new PanoptesError(ErrorCode.ConfigInvalid, `no model named "${unknown.join('", "')}" in the zoo; known: ${Object.keys(zoo).join(', ')}`);
  if (members.length === 1) return zoo[name]!;
  const family = (await findPrefixFamilies(members.map((m) => zoo[m]!))).find((f) => f.name === name);
  if (!family) throw new PanoptesError(ErrorCode.ConfigInvalid, `${members.join(', ')} do not form a prefix family: not one architecture and input, or they share too little of their weights`);
  return family;
}

/** The plan as the output format: nodes with their duty cycle and sessions. */
const planJson = (packing: Packing): unknown => ({
  nodes: packing.nodes.map((node) => ({ dutyCycleMs: round(node.dutyCycleMs), sessions: node.sessions.map((s) => ({ ...s, rate: round(s.rate) })) })),
  unschedulable: packing.unschedulable,
});

const round = (n: number): number => Math.round(n * 1000) / 1000;

/** `profile`, `plan` and `simulate`: the scheduler's commands. */
export function addSchedulerCommands(program: Command, logger: () => Logger): void {
  program
    .command('profile')
    .description("measure a zoo model's latency and memory at each batch size on this machine, for the scheduler")
    .argument('<model>', 'a model of configs/models.yaml, e.g. centernet; or a prefix family, its members joined by +')
    .option('--profiles <dir>', 'where profiles are kept', 'profiles')
    .option('--models <file>', 'the model zoo (default: configs/models.yaml)')
    .option('--max-batch <n>', "largest batch measured (default: the model's maxBatch)", parseInteger)
    .option('--runs <n>', 'timed runs per batch size', parseInteger, 10)
    .option('--warmup <n>', 'untimed runs per batch size before them', parseCount, 2)
    .option('--image <file...>', 'JPEG images to run on (default: the stills in test/fixtures/images)')
    .action(async (name: string, opts: { profiles: string; models?: string; maxBatch?: number; runs: number; warmup: number; image?: string[] }) => {
      const spec = await zooModel(name, loadModelZoo(opts.models === undefined ? undefined : resolve(opts.models)));
      // One of a backend's model threads, as a deployment runs them by default: a share of the cores.
      const intraOpThreads = Math.max(1, Math.floor(availableParallelism() / defaultModelThreads()));
      const runtime = createOnnxRuntime({ logger: logger(), intraOpThreads });
      try {
        const device = cpuDeviceName();
        process.stderr.write(`profiling ${name} on ${device} (one model thread of ${intraOpThreads} core(s)), batch 1..${opts.maxBatch ?? spec.maxBatch}, ${opts.runs} runs each\n`);
        const timings = await profileModel(spec, runtime, await profileImages(opts.image), {
          maxBatch: opts.maxBatch ?? spec.maxBatch,
          runs: opts.runs,
          warmup: opts.warmup,
          onBatch: (t) => process.stderr.write(`  batch ${t.batch}: ${t.latencyMs} ± ${t.stdMs} ms, ${t.cpuMs} ms of CPU, ${t.memoryMB} MB\n`),
        });
        const profile: BatchProfile = batchProfileSchema.parse({ version: 1, device, ...timings });
        for (const warning of profileWarnings(profile)) process.stderr.write(`warning: ${warning}\n`);
        mkdirSync(opts.profiles, { recursive: true });
        const file = join(opts.profiles, `${device}.${name}.json`);
        writeFileSync(file, `${JSON.stringify(profile, null, 2)}\n`);
        process.stdout.write(`${file}\n`);
      } finally {
        await runtime.close();
      }
    });

  program
    .command('plan')
    .description('place model sessions on GPUs with squishy bin packing (Nexus) and print the plan')
    .requiredOption('--sessions <file.json>', 'sessions: [{"id","model","sloMs","rate"}], rate in requests/s')
    .option('--profiles <dir>', 'batch profiles, one JSON file per (device, model)', 'profiles')
    .option('--device <name>', 'the device to plan for, when the profiles cover several')
    .option('--memory-mb <n>', "one device's memory; sessions on a node must fit in it", parseInteger)
    .option('--devices <n>', "the devices there are: when the plan needs more, sessions step down to their model's cheaper variants in the zoo (variantOf), least accuracy lost per device freed first", parseInteger)
    .option('--models <file>', 'the model zoo whose variants --devices may use (default: configs/models.yaml)')
    .option('--json', 'print the plan as JSON')
    .action((opts: { sessions: string; profiles: string; device?: string; memoryMb?: number; devices?: number; models?: string; json?: boolean }) => {
      const sessions = loadConfigFile(sessionsFileSchema, opts.sessions);
      const profiles = loadProfiles(opts.profiles);
      for (const warning of warningsFor(profiles, sessions.map((s) => s.model), opts.device)) process.stderr.write(`warning: ${warning}\n`);
      const profileOf = profileLookup(profiles, opts.device);
      const packOptions = opts.memoryMb ? { deviceMemoryMB: opts.memoryMb } : {};
      const { packing, downgrades } =
        opts.devices === undefined ? { packing: squishyBinPacking(sessions, profileOf, packOptions), downgrades: [] } : downgradeToFit(sessions, zooVariants(loadModelZoo(opts.models === undefined ? undefined : resolve(opts.models))), opts.devices, profileOf, packOptions);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ ...(planJson(packing) as object), ...(opts.devices === undefined ? {} : { downgrades }) })}\n`);
        return;
      }
      const rows = packing.nodes.flatMap((node, i) =>
        node.sessions.map((s) => ({ node: i, dutyCycleMs: round(node.dutyCycleMs), session: s.id, model: s.model, sloMs: s.sloMs, rate: round(s.rate), batch: s.batch })),
      );
      const columns = ['node', 'dutyCycleMs', 'session', 'model', 'sloMs', 'rate', 'batch'].map((name) => ({ name }));
      process.stdout.write(`${packing.nodes.length} GPU${packing.nodes.length === 1 ? '' : 's'}\n${formatTable({ columns, rows }, 'table')}\n`);
      for (const d of downgrades) process.stdout.write(`downgraded: ${d.session} served by ${d.to} instead of ${d.from} (accuracy −${(100 * d.accuracyLost).toFixed(1)} points, frees ${d.devicesFreed.toFixed(2)} devices)\n`);
      if (opts.devices !== undefined && packing.nodes.length > opts.devices) process.stdout.write(`needs ${packing.nodes.length} devices of ${opts.devices} even with every variant: the rest is dropped\n`);
      for (const u of packing.unschedulable) process.stdout.write(`unschedulable: ${u.id}: ${u.reason}\n`);
    });

  program
    .command('simulate')
    .description("run the scheduler's experiments in the discrete-event simulator and print their figures (docs/scheduler.md puts them beside the paper's)")
    .argument('<experiment>', `all, or one of ${EXPERIMENT_NAMES.join(', ')}`)
    .option('--json', 'print the figures as one JSON object, as the last line')
    .action((experiment: string, opts: { json?: boolean }) => {
      const figures = runExperiments([experiment]);
      if (opts.json) process.stdout.write(`${JSON.stringify(figures)}\n`);
      else for (const [name, value] of Object.entries(figures)) process.stdout.write(`${name}: ${JSON.stringify(value)}\n`);
    });
}
