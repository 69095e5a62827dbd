import { existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { describeError, ErrorCode } from '../errors.js';
import { projectRoot, resolveConfigPath } from '../paths.js';
import { configError, deepFreeze, loadConfigFile, parseConfig, type ConfigIssue } from './load.js';
import { deploymentSchema, sourceSchema, type Deployment, type SourceConfig } from './deployment-schema.js';
import { appSpecSchema, modelZooSchema, type AppSpec, type ModelSpec } from './schema.js';
import { checkCache, localParamsIssues, paramsIssues, type ParamsRulesByArchitecture } from './params.js';
import { matchesId } from './source-pattern.js';

/** A model spec whose files are absolute paths that exist. */
export type ResolvedModel = ModelSpec & {
  file: string;
  charset?: string;
  labelsFile?: string;
  /** A prefix family's members (Nexus §6.3): found by the backend among the zoo's models, never written in the zoo. */
  family?: readonly ResolvedModel[];
};

/** What runtime modules receive: validated, cross-checked, paths resolved, frozen. */
export interface CompiledConfig {
  file: string;
  dataDir: string;
  deployment: Deployment;
  /** Sources to run (optional ones whose file is missing are left out and listed in `skipped`). */
  sources: readonly SourceConfig[];
  skipped: readonly { id: string; reason: string }[];
  apps: Readonly<Record<string, AppSpec>>;
  models: Readonly<Record<string, ResolvedModel>>;
}

export const DEFAULT_MODELS_FILE = (): string => resolve(projectRoot(), 'configs/models.yaml');

/** `architectures`: those a runner exists for, where the caller knows them (the analyzers do); any other is refused. */
export function loadModelZoo(file = DEFAULT_MODELS_FILE(), architectures?: readonly string[]): Readonly<Record<string, ResolvedModel>> {
  const zoo = loadConfigFile(modelZooSchema, file);
  const baseDir = dirname(file);
  const issues: ConfigIssue[] = [];
  // Without a prototype: a model named "constructor" or "toString" is looked up, not inherited.
  const models: Record<string, ResolvedModel> = Object.create(null) as Record<string, ResolvedModel>;
  zoo.models.forEach((model, i) => {
    if (models[model.name]) issues.push({ file, path: `models[${i}].name`, message: `duplicate model name "${model.name}"` });
    const resolved: ResolvedModel = { ...model };
    for (const key of ['file', 'charset', 'labelsFile'] as const) {
      if (model[key] === undefined) continue;
      try {
        const path = (resolved[key] = resolveConfigPath(model[key], baseDir));
        // A device (/dev/zero) would be read without end, a folder not at all.
        if (!isUrl(path) && !statSync(path, { throwIfNoEntry: false })?.isFile()) {
          issues.push({ file, path: `models[${i}].${key}`, message: `got "${model[key]}"; expected an existing file (${path})` });
        }
      } catch (err) {
        issues.push({ file, path: `models[${i}].${key}`, message: describeError(err) });
      }
    }
    if (architectures && !architectures.includes(model.architecture)) {
      issues.push({ file, path: `models[${i}].architecture`, message: `got "${model.architecture}"; expected one of: ${architectures.join(', ')}` });
    }
    if (model.architecture === 'centernet' && model.inputSize !== undefined && model.inputSize % 32 !== 0) {
      // Its stride-32 feature map is upsampled by 2 three times, down to the stride-4 heads.
      issues.push({ file, path: `models[${i}].inputSize`, message: `got ${model.inputSize}; expected a multiple of 32 for CenterNet` });
    }
    models[model.name] = resolved;
  });
  zoo.models.forEach((model, i) => {
    const of = model.variantOf && zoo.models.find((m) => m.name === model.variantOf!.model);
    if (model.variantOf && !of) issues.push({ file, path: `models[${i}].variantOf.model`, message: `got "${model.variantOf.model}"; expected another model of this zoo` });
    else if (of && (of.name === model.name || of.task !== model.task)) {
      issues.push({ file, path: `models[${i}].variantOf.model`, message: `got "${of.name}" (${of.task}); expected another model with this one's task (${model.task})` });
    }
  });
  if (issues.length > 0) throw configError(file, issues);
  return deepFreeze(models);
}

export function loadApp(file: string, models: Readonly<Record<string, ResolvedModel>>, params?: ParamsRulesByArchitecture): AppSpec {
  const app = loadConfigFile(appSpecSchema, file);
  const issues = checkAppGraph(app, models).map((i) => ({ ...i, file }));
  if (params) {
    app.nodes.forEach((node, i) => {
      const model = models[node.model];
      if (model) issues.push(...paramsIssues(node.params, model, params, file, `nodes[${i}].params`));
    });
  }
  if (issues.length > 0) throw configError(file, issues);
  return app;
}

/** An app's DAG must be a tree rooted at `frames` over known nodes and models. */
export function checkAppGraph(app: AppSpec, models: Readonly<Record<string, unknown>>): Omit<ConfigIssue, 'file'>[] {
  const issues: Omit<ConfigIssue, 'file'>[] = [];
  const nodeIds = new Set<string>();
  app.nodes.forEach((node, i) => {
    if (nodeIds.has(node.id)) issues.push({ path: `nodes[${i}].id`, message: `duplicate node id "${node.id}"` });
    nodeIds.add(node.id);
    const model = models[node.model] as { task?: string; architecture?: string } | undefined;
    if (!model) {
      issues.push({
        path: `nodes[${i}].model`,
        message: `got "${node.model}"; expected a model from the zoo: ${Object.keys(models).join(', ')}`,
      });
    } else if (node.parse && model.task !== 'recognize-text') {
      issues.push({ path: `nodes[${i}].parse`, message: `node "${node.id}" runs ${node.model} (${model.task}); parse reads text: use a text recognizer` });
    } else if (node.track && model.task !== 'detect-objects' && model.task !== 'detect-text') {
      issues.push({ path: `nodes[${i}].track`, message: `node "${node.id}" runs ${node.model} (${model.task}); track follows detections: use a detector` });
    }
    if (node.specialize) issues.push(...checkSpecialize(node, i, models));
    if (node.cache && model) issues.push(...checkCache(node, i, model.architecture));
    for (const key of ['lines', 'zones'] as const) {
      if (node[key].length > 0 && !node.track) issues.push({ path: `nodes[${i}].${key}`, message: `node "${node.id}" has ${key} but no \`track\`; ${key} count tracked objects` });
      const names = node[key].map((x) => x.name);
      names.forEach((name, j) => {
        if (names.indexOf(name) !== j) issues.push({ path: `nodes[${i}].${key}[${j}].name`, message: `duplicate name "${name}"` });
      });
    }
  });
  // A node may have several inputs (fan-in): it runs on what flows along each of its edges.
  const parents = new Map<string, string[]>();
  app.edges.forEach((edge, i) => {
    if (edge.from !== 'frames' && !nodeIds.has(edge.from)) {
      issues.push({ path: `edges[${i}].from`, message: `got "${edge.from}"; expected "frames" or a node id` });
    }
    if (!nodeIds.has(edge.to)) issues.push({ path: `edges[${i}].to`, message: `got "${edge.to}"; expected a node id` });
    if (edge.from === edge.to || (parents.get(edge.to) ?? []).includes(edge.from)) {
      issues.push({ path: `edges[${i}]`, message: `edge ${edge.from} → ${edge.to} ${edge.from === edge.to ? 'loops on one node' : 'is given twice'}` });
    }
    parents.set(edge.to, [...(parents.get(edge.to) ?? []), edge.from]);
    const filter = edge.filter as Record<string, unknown>;
    if (edge.from === 'frames' && Object.keys(filter).length > 0) {
      issues.push({ path: `edges[${i}].filter`, message: `got ${JSON.stringify(filter)}; expected no filter on an edge from "frames" (filters select a node's outputs)` });
    }
  });
  app.nodes.forEach((node, i) => {
    // A tracker follows whole frames; a node fed crops runs several times per frame.
    const cropper = (parents.get(node.id) ?? []).find((p) => p !== 'frames');
    if (node.track && cropper) {
      issues.push({ path: `nodes[${i}].track`, message: `node "${node.id}" is fed crops by "${cropper}"; only a node fed by "frames" (and nothing else) can track` });
    }
    // A detector's cache compares a frame with the stream's previous one; crops are not a stream.
    const detectorCache = node.cache && (models[node.model] as { architecture?: string } | undefined)?.architecture === 'centernet';
    if (detectorCache && cropper) {
      issues.push({ path: `nodes[${i}].cache`, message: `node "${node.id}" is fed crops by "${cropper}"; only a node fed by "frames" (and nothing else) can have a cache` });
    }
  });
  // Every node is reached from frames, and no path comes back to where it started.
  const children = new Map<string, string[]>();
  for (const [child, froms] of parents) for (const from of froms) children.set(from, [...(children.get(from) ?? []), child]);
  const state = new Map<string, 'visiting' | 'done'>();
  const cycles = new Set<string>();
  const visit = (at: string): void => {
    if (state.get(at) === 'visiting') cycles.add(at);
    if (state.has(at)) return;
    state.set(at, 'visiting');
    for (const next of children.get(at) ?? []) visit(next);
    state.set(at, 'done');
  };
  visit('frames');
  app.nodes.forEach((node, i) => {
    if (!state.has(node.id)) issues.push({ path: `nodes[${i}].id`, message: `node "${node.id}" is not reachable from "frames" (missing edge or cycle)` });
    if (cycles.has(node.id)) issues.push({ path: `nodes[${i}].id`, message: `node "${node.id}" is on a cycle; an app's graph must be acyclic` });
  });
  return issues;
}

/**
 * A specialized node classifies: its model (the oracle) and its templates are classifiers of the
 * zoo of one kind (image classifiers with a class list, or face-embedding models giving
 * identities), each with the `features` output a template's top layer is retrained on; and
 * a* + τ_a is an accuracy the cascade can reach.
 */
/** A node's `cache:` against the schema of its model's kind of cache. */
function checkSpecialize(node: AppSpec['nodes'][number], i: number, models: Readonly<Record<string, unknown>>): Omit<ConfigIssue, 'file'>[] {
  const { templates, oracleAccuracy, accuracyMargin } = node.specialize!;
  const issues: Omit<ConfigIssue, 'file'>[] = [];
  // One class per crop, and the features a template's head reads: an image classifier, or a face-embedding model's identities.
  const kindOf = (name: string): 'image classifier' | 'face-embedding model' | undefined => {
    const model = models[name] as { task?: string; labelsFile?: string; architecture?: string } | undefined;
    if (model?.task !== 'recognize-attributes') return undefined;
    if (model.architecture === 'face-embedding') return 'face-embedding model';
    return model.labelsFile !== undefined ? 'image classifier' : undefined;
  };
  const classifier = (name: string): boolean => kindOf(name) !== undefined;
  if (models[node.model] && !classifier(node.model)) {
    issues.push({ path: `nodes[${i}].specialize`, message: `node "${node.id}" runs ${node.model}, which is not a classifier (an image classifier with a labelsFile, or a face-identity model); the oracle of a specialized node is one` });
  }
  if (node.parse || node.track) issues.push({ path: `nodes[${i}].specialize`, message: `node "${node.id}" specializes; it cannot also ${node.parse ? 'parse text' : 'track'}` });
  if (oracleAccuracy + accuracyMargin > 1) {
    issues.push({
      path: `nodes[${i}].specialize.accuracyMargin`,
      message: `oracleAccuracy ${oracleAccuracy} + accuracyMargin ${accuracyMargin} is above 1: no cascade can reach it, so the node would never specialize (the thesis' +0.05 is for an a* measured against hand labels)`,
    });
  }
  templates.forEach((name, j) => {
    const at = `nodes[${i}].specialize.templates[${j}]`;
    if (!models[name]) issues.push({ path: at, message: `got "${name}"; expected a model from the zoo: ${Object.keys(models).join(', ')}` });
    else if (!classifier(name)) issues.push({ path: at, message: `got "${name}", which is not a classifier; a template is a cheaper classifier with a \`features\` output (e.g. efficientnet-lite0, mobileface)` });
    else if (name === node.model) issues.push({ path: at, message: `got "${name}", the oracle itself; a template is a cheaper model` });
    else if (classifier(node.model) && kindOf(name) !== kindOf(node.model)) {
      issues.push({ path: at, message: `got "${name}" (${kindOf(name)}) for ${node.model} (${kindOf(node.model)}): a template answers what its oracle does` });
    }
    if (templates.indexOf(name) !== j) issues.push({ path: at, message: `template "${name}" is listed twice` });
  });
  return issues;
}

/**
 * The node a specialized node's template runs as, in plans and sessions (`kind~efficientnet-lite0`):
 * node ids cannot hold `~`, so it names no node of the app.
 */
export function templateNodeId(node: string, template: string): string {
  return `${node}~${template}`;
}

/** The specialized node a template's node id belongs to; undefined for an app's own node. */
export function specializedNodeOf(id: string): string | undefined {
  const at = id.indexOf('~');
  return at < 0 ? undefined : id.slice(0, at);
}

/**
 * An app's graph as the scheduler plans it and its stage deadlines are set: each specialized
 * node's templates are nodes of their own, fed by the node's parents, and each feeds the node
 * (fork-join): the oracle runs on the inputs WEG explores with straight from the parents, and
 * after a template on those its cascade passes on or spot-checks, so the node's budget up to it
 * includes the template's.
 */
export function scheduledGraph(app: AppSpec): { nodes: { id: string; model: string }[]; edges: { from: string; to: string }[] } {
  const templatesOf = (node: string) => app.nodes.find((n) => n.id === node)?.specialize?.templates ?? [];
  const nodes = app.nodes.flatMap(({ id, model, specialize }) => [{ id, model }, ...(specialize?.templates ?? []).map((t) => ({ id: templateNodeId(id, t), model: t }))]);
  const edges = [
    ...app.edges.flatMap(({ from, to }) => [{ from, to }, ...templatesOf(to).map((t) => ({ from, to: templateNodeId(to, t) }))]),
    ...app.nodes.flatMap(({ id }) => templatesOf(id).map((t) => ({ from: templateNodeId(id, t), to: id }))),
  ];
  return { nodes, edges };
}

export interface CompileOptions {
  /** Overrides the deployment's `dataDir`; both are relative to the working directory. */
  dataDir?: string;
  /** Where the environment overrides are read (`ENVIRONMENT_OVERRIDES`). @defaultValue process.env */
  env?: Readonly<Record<string, string | undefined>>;
  /** Each architecture's params: with them every node's params are checked before anything runs (`config check` included), and an unknown architecture is refused. */
  params?: ParamsRulesByArchitecture;
}

/**
 * Settings the environment overrides, read here and nowhere else: what a compiled config says is
 * what runs. Secrets (Twitch credentials, a ClickHouse password in its URL) can then stay out
 * of deployment files.
 */
export const ENVIRONMENT_OVERRIDES = {
  PANOPTES_KAFKA_BROKERS: 'bus.brokers (comma-separated host:port)',
  PANOPTES_CLICKHOUSE_URL: 'sink.url',
  PANOPTES_TWITCH_CLIENT_ID: "every Twitch source's twitch.clientId",
  PANOPTES_TWITCH_OAUTH_TOKEN: "every Twitch source's twitch.oauthToken",
} as const;

type Environment = Readonly<Record<string, string | undefined>>;

function withEnvironment(deployment: Deployment, env: Environment): Deployment {
  const brokers = env.PANOPTES_KAFKA_BROKERS?.split(',').filter(Boolean);
  const url = env.PANOPTES_CLICKHOUSE_URL;
  const bus = deployment.bus.kind === 'kafka' && brokers && brokers.length > 0 ? { ...deployment.bus, brokers } : deployment.bus;
  const sink = deployment.sink.kind === 'clickhouse' && url ? { ...deployment.sink, url } : deployment.sink;
  return { ...deployment, bus, sink };
}

function sourceWithEnvironment(source: SourceConfig, env: Environment): SourceConfig {
  if (!source.twitch) return source;
  const clientId = env.PANOPTES_TWITCH_CLIENT_ID ?? source.twitch.clientId;
  const oauthToken = env.PANOPTES_TWITCH_OAUTH_TOKEN ?? source.twitch.oauthToken;
  return { ...source, twitch: { ...source.twitch, ...(clientId ? { clientId } : {}), ...(oauthToken ? { oauthToken } : {}) } };
}

export function loadDeployment(file: string, options: CompileOptions = {}): CompiledConfig {
  return compileDeployment(loadConfigFile(deploymentSchema, file), file, options);
}

/**
 * Cross-checks a validated deployment and resolves its paths. `file` names it in errors and
 * anchors relative paths (a replay passes a path inside `configs/`).
 */
export function compileDeployment(configured: Deployment, file: string, options: CompileOptions = {}): CompiledConfig {
  const env = options.env ?? process.env;
  const deployment = withEnvironment(configured, env);
  const baseDir = dirname(resolve(file));
  const models = loadModelZoo(resolve(baseDir, deployment.models), options.params && Object.keys(options.params));

  // Without a prototype, as the models: an app named "constructor" is looked up, not inherited.
  const apps: Record<string, AppSpec> = Object.create(null) as Record<string, AppSpec>;
  const issues: ConfigIssue[] = [];
  const appFiles = new Map<string, string>();
  // A missing app file, named by its key here; the sources naming its app are not judged without it.
  const missing = deployment.apps.flatMap((appFile, i) => {
    const path = resolve(baseDir, appFile);
    return existsSync(path) ? [] : [{ file, path: `apps[${i}]`, message: `got "${appFile}"; expected an existing app file (${path})` }];
  });
  if (missing.length > 0) throw configError(file, missing, ErrorCode.ConfigNotFound);
  deployment.apps.forEach((appFile, i) => {
    const app = loadApp(resolve(baseDir, appFile), models, options.params);
    const first = appFiles.get(app.name);
    if (first !== undefined) issues.push({ file, path: `apps[${i}]`, message: `${appFile} is named "${app.name}", as ${first} is; each app needs a name of its own` });
    else appFiles.set(app.name, appFile);
    apps[app.name] = app;
  });

  const sources: SourceConfig[] = [];
  const skipped: { id: string; reason: string }[] = [];
  const ids = new Set<string>();
  deployment.sources.forEach((source, i) => {
    if (ids.has(source.id)) issues.push({ file, path: `sources[${i}].id`, message: `duplicate source id "${source.id}"` });
    ids.add(source.id);
    const checked = checkSource(source, { file, at: `sources[${i}]`, baseDir, apps }, issues);
    if (checked === 'skipped') skipped.push({ id: source.id, reason: `file not found: ${resolve(baseDir, source.path!)}` });
    else if (checked) sources.push(sourceWithEnvironment(checked, env));
  });
  const local = deployment.ingest.localAnalysis;
  if (local) {
    for (const key of ['model', 'replaces'] as const) {
      const name = local[key] ?? local.model;
      const model = models[name];
      if (!model) issues.push({ file, path: `ingest.localAnalysis.${key}`, message: `got "${name}"; expected a model from the zoo: ${Object.keys(models).join(', ')}` });
      else if (model.task !== 'detect-objects') issues.push({ file, path: `ingest.localAnalysis.${key}`, message: `got "${name}" (${model.task}); expected an object detector (task detect-objects)` });
    }
    const model = models[local.model];
    if (model && options.params) issues.push(...localParamsIssues(Object.values(apps), local, model, options.params, file));
  }
  const { stages, batching } = deployment.backend;
  if (stages > 1 && batching !== 'on-time') issues.push({ file, path: 'backend.stages', message: `got ${stages}; models run in stages only with \`batching: on-time\`` });
  if (stages > 1) {
    for (const app of Object.values(apps)) {
      const cached = app.nodes.find((n) => n.cache);
      if (cached) issues.push({ file, path: 'backend.stages', message: `got ${stages}; app ${app.name}'s node "${cached.id}" has a cache, which runs models whole (use stages: 1)` });
    }
  }
  if (issues.length > 0) throw configError(file, issues);

  return deepFreeze({
    file: resolve(file),
    dataDir: resolve(options.dataDir ?? deployment.dataDir),
    deployment,
    sources,
    skipped,
    apps,
    models,
  });
}

/**
 * One more source for a running deployment (JSON or YAML text, e.g. an HTTP request's body),
 * validated and cross-checked as a source in the deployment file would be; `where` names it in
 * errors. Relative paths are relative to the deployment file.
 * @throws PanoptesError ConfigInvalid listing every problem
 */
export function compileSource(text: string, config: CompiledConfig, where: string): SourceConfig {
  const source = parseConfig(sourceSchema, text, where);
  const issues: ConfigIssue[] = [];
  const checked = checkSource(source, { file: where, at: '', baseDir: dirname(config.file), apps: config.apps }, issues);
  if (checked === 'skipped') issues.push({ file: where, path: 'path', message: `got "${source.path}"; expected an existing file` });
  if (issues.length > 0 || !checked || checked === 'skipped') throw configError(where, issues);
  return deepFreeze(sourceWithEnvironment(checked, process.env));
}

/**
 * A source's apps must exist and its file too (an optional source whose file is missing is
 * `skipped`); returns the source with its path resolved, or undefined after pushing its problems.
 */
function checkSource(
  source: SourceConfig,
  where: { file: string; at: string; baseDir: string; apps: Readonly<Record<string, AppSpec>> },
  issues: ConfigIssue[],
): SourceConfig | 'skipped' | undefined {
  const { file, at, baseDir, apps } = where;
  const key = (name: string): string => (at ? `${at}.${name}` : name);
  const before = issues.length;
  source.apps.forEach((name, j) => {
    if (!apps[name]) issues.push({ file, path: key(`apps[${j}]`), message: `got "${name}"; expected one of the apps: ${Object.keys(apps).join(', ')}` });
  });
  const selectedBy = Object.values(apps).filter((app) => !source.apps.includes(app.name) && app.sources.some((pattern) => matchesId(pattern, source.id)));
  const analyzedBy = [...source.apps, ...selectedBy.map((app) => app.name)];
  if (analyzedBy.length === 0) issues.push({ file, path: key('apps'), message: `source "${source.id}" is analyzed by no app; list apps here or name the source in an app's \`sources\`` });
  const path = source.path === undefined || isUrl(source.path) ? source.path : resolve(baseDir, source.path);
  if (path && !isUrl(path) && !existsSync(path)) {
    if (source.optional) return issues.length > before ? undefined : 'skipped';
    issues.push({ file, path: key('path'), message: `got "${source.path}"; expected an existing file (${path})` });
  }
  if (issues.length > before) return undefined;
  return { ...source, apps: analyzedBy, ...(path ? { path } : {}) };
}

export function isUrl(path: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(path);
}
