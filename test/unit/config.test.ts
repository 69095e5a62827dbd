import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type {
  PanoptesError} from '../../core/index.js';
import {
  appSpecSchema,
  cacheSchema,
  checkAppGraph,
  classifierCacheSchema,
  CONFIG_KINDS,
  scheduledGraph,
  configJsonSchema,
  deploymentSchema,
  ErrorCode,
  loadApp,
  loadDeployment,
  loadModelZoo,
  modelZooSchema,
  parseConfig,
  projectRoot,
  type ConfigIssue,
  type ConfigKind,
} from '../../core/index.js';
import { thrown } from '../helpers.js';

const root = projectRoot();
const CENTERNET = join(root, 'models/centernet.onnx');
const SOURCE_KEYS = ['id', 'path', 'synthetic', 'twitch', 'apps', 'fps', 'sample', 'live', 'listen', 'rtspTransport', 'width', 'speed', 'loop', 'startTime', 'optional'];

const scratch = mkdtempSync(join(tmpdir(), 'panoptes-config-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let dirs = 0;

const MODELS = `models:
  - name: centernet
    task: detect-objects
    architecture: centernet
    file: ${CENTERNET}
    inputSize: 512
    labels: coco
    license: MIT
`;

const TRAFFIC = `name: traffic
sloMs: 1500
nodes:
  - id: detect
    model: centernet
edges:
  - from: frames
    to: detect
`;

/** A fresh folder holding a models manifest, an app and a clip, plus any files given. */
function project(files: Record<string, string> = {}): string {
  const dir = join(scratch, `p${++dirs}`);
  mkdirSync(join(dir, 'apps'), { recursive: true });
  const all: Record<string, string> = { 'models.yaml': MODELS, 'apps/traffic.yaml': TRAFFIC, 'clip.mp4': 'not really a video', ...files };
  for (const [name, text] of Object.entries(all)) writeFileSync(join(dir, name), text);
  return dir;
}

function deployment(sources: string, extra = ''): string {
  return `apps: [apps/traffic.yaml]
${extra}sources:
${sources}`;
}

const GOOD_SOURCE = `  - id: cam-1
    path: clip.mp4
    apps: [traffic]
    fps: 2
`;


function invalid(fn: () => unknown): { err: PanoptesError; issues: ConfigIssue[] } {
  const err = thrown(fn);
  expect(err.code).toBe(ErrorCode.ConfigInvalid);
  return { err, issues: err.details.issues as ConfigIssue[] };
}

describe('parseConfig', () => {
  const file = '/configs/mine.yaml';

  it('parses a valid deployment, fills defaults and deep-freezes the result', () => {
    const config = parseConfig(deploymentSchema, deployment(GOOD_SOURCE), file);
    expect(config.sources[0]).toMatchObject({ id: 'cam-1', path: 'clip.mp4', apps: ['traffic'], fps: 2, speed: 'max', loop: false, optional: false });
    expect(config.bus).toEqual({ kind: 'memory', partitions: 4, maxBytes: 256 * 1024 * 1024 });
    expect(config.dataDir).toBe('./data');
    // No batch: each model's comes from this machine's profile (cli/batch-sizes.ts); no threads: from its cores (cli/run-setup.ts).
    expect(config.backend).toEqual({ spinning: false, snapshots: true, batching: 'sliding-window', stages: 1, planAhead: true });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.sources)).toBe(true);
    expect(Object.isFrozen(config.sources[0])).toBe(true);
    expect(Object.isFrozen(config.sources[0]?.apps)).toBe(true);
    expect(Object.isFrozen(config.bus)).toBe(true);
    // ES modules run in strict mode: writing to a frozen object throws.
    expect(() => {
      (config.sources[0] as { fps: number }).fps = 30;
    }).toThrow(TypeError);
    expect(() => {
      (config.sources as unknown as unknown[]).push({});
    }).toThrow(TypeError);
    expect(() => {
      (config.bus as { partitions: number }).partitions = 1;
    }).toThrow(TypeError);
    expect(config.sources[0]?.fps).toBe(2);
  });

  it('rejects an unknown key, naming the file, line, key path and the keys it expected', () => {
    const text = deployment(`${GOOD_SOURCE}    fsp: 2\n`);
    const { err, issues } = invalid(() => parseConfig(deploymentSchema, text, file));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ file, line: 7, path: 'sources[0].fsp' });
    expect(err.message).toContain(`${file}:7: sources[0].fsp`);
    expect(err.message).toContain('"fsp"');
    expect(err.message).toContain(SOURCE_KEYS.join(', '));
    expect(err.details.file).toBe(file);
  });

  it('rejects a wrong type, naming the path, the value and the expected type', () => {
    const text = deployment(GOOD_SOURCE.replace('fps: 2', 'fps: fast'));
    const { err, issues } = invalid(() => parseConfig(deploymentSchema, text, file));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ file, line: 6, path: 'sources[0].fps' });
    expect(err.message).toContain(`${file}:6: sources[0].fps`);
    expect(err.message).toContain('"fast"');
    expect(err.message).toContain('number');
  });

  it('rejects a string where a list belongs', () => {
    const text = deployment(GOOD_SOURCE.replace('apps: [traffic]', 'apps: traffic'));
    const { err } = invalid(() => parseConfig(deploymentSchema, text, file));
    expect(err.message).toContain(`${file}:5: sources[0].apps`);
    expect(err.message).toContain('"traffic"');
    expect(err.message).toContain('array');
  });

  it('rejects a missing required key, naming its path and what was expected', () => {
    const text = deployment(GOOD_SOURCE.replace('  - id: cam-1\n    path', '  - path'));
    const { err, issues } = invalid(() => parseConfig(deploymentSchema, text, file));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe('sources[0].id');
    // A missing key is reported at the nearest thing that exists: the source, on line 3.
    expect(issues[0]?.line).toBe(3);
    expect(err.message).toContain(`${file}:3: sources[0].id`);
    expect(err.message).toContain('missing');
    expect(err.message).toContain('string');
  });

  it('rejects a missing top-level list', () => {
    const { err, issues } = invalid(() => parseConfig(deploymentSchema, 'apps: [apps/traffic.yaml]\n', file));
    expect(issues.map((i) => i.path)).toEqual(['sources']);
    expect(err.message).toContain('missing');
  });

  it('rejects a source with both or neither of path and synthetic', () => {
    const neither = deployment('  - id: cam-1\n    apps: [traffic]\n');
    expect(invalid(() => parseConfig(deploymentSchema, neither, file)).issues[0]?.path).toBe('sources[0]');
    const both = deployment(`${GOOD_SOURCE}    synthetic: { lavfi: testsrc2, durationS: 1 }\n`);
    const { err, issues } = invalid(() => parseConfig(deploymentSchema, both, file));
    expect(issues[0]?.path).toBe('sources[0]');
    expect(err.message).toContain('synthetic');
  });

  it('takes one sampling policy, and refuses fps with sample or an unknown policy', () => {
    const withoutFps = GOOD_SOURCE.replace('    fps: 2\n', '');
    const scenes = parseConfig(deploymentSchema, deployment(`${withoutFps}    sample: { sceneChange: 0.4 }\n`), file);
    expect(scenes.sources[0]?.sample).toEqual({ sceneChange: 0.4 });
    const both = invalid(() => parseConfig(deploymentSchema, deployment(`${GOOD_SOURCE}    sample: { everyNth: 5 }\n`), file));
    expect(both.issues[0]?.path).toBe('sources[0].sample');
    expect(both.err.message).toContain('not both');
    const unknown = invalid(() => parseConfig(deploymentSchema, deployment(`${withoutFps}    sample: { everyOther: true }\n`), file));
    expect(unknown.issues[0]?.path).toMatch(/^sources\[0\]\.sample/);
  });

  it('takes a Twitch channel or a listening camera, and says what is wrong with each', () => {
    const twitch = parseConfig(deploymentSchema, deployment('  - id: streamer\n    twitch: { channel: some_channel }\n    apps: [traffic]\n'), file);
    expect(twitch.sources[0]?.twitch).toEqual({ channel: 'some_channel', quality: 'best' });
    const badChannel = invalid(() => parseConfig(deploymentSchema, deployment('  - id: streamer\n    twitch: { channel: "no spaces", quality: hd }\n    apps: [traffic]\n'), file));
    expect(badChannel.issues.map((i) => i.path)).toEqual(['sources[0].twitch.channel', 'sources[0].twitch.quality']);
    const twitchAndPath = invalid(() => parseConfig(deploymentSchema, deployment(`${GOOD_SOURCE}    twitch: { channel: a }\n`), file));
    expect(twitchAndPath.err.message).toContain('exactly one of `path`, `synthetic` or `twitch`');
    const listening = parseConfig(deploymentSchema, deployment('  - id: pushed\n    path: rtsp://0.0.0.0:8554/cam\n    listen: true\n    apps: [traffic]\n'), file);
    expect(listening.sources[0]?.listen).toBe(true);
    const listenOnFile = invalid(() => parseConfig(deploymentSchema, deployment(`${GOOD_SOURCE}    listen: true\n`), file));
    expect(listenOnFile.issues[0]?.path).toBe('sources[0].listen');
  });

  it('rejects a YAML syntax error, naming the file', () => {
    const text = deployment(GOOD_SOURCE.replace('apps: [traffic]', 'apps: [traffic'));
    const { err, issues } = invalid(() => parseConfig(deploymentSchema, text, file));
    expect(issues.length).toBeGreaterThanOrEqual(1);
    expect(err.message).toContain(file);
    expect(err.message).toContain('YAML syntax');
    expect(issues[0]?.line).toBeGreaterThan(1);
  });

  it('reports several problems at once', () => {
    const text = `apps: [apps/traffic.yaml]
sources:
  - id: cam-1
    path: clip.mp4
    apps: [traffic]
    fps: fast
    fsp: 2
  - id: Cam 2
    path: clip.mp4
    apps: [traffic]
sink:
  flushMs: -5
`;
    const { err, issues } = invalid(() => parseConfig(deploymentSchema, text, file));
    expect(issues.map((i) => i.path).sort()).toEqual(['sink.flushMs', 'sources[0].fps', 'sources[0].fsp', 'sources[1].id']);
    expect(err.message).toContain('(4 problems)');
    expect(err.message).toContain(`${file}:6: sources[0].fps`);
    expect(err.message).toContain(`${file}:7: sources[0].fsp`);
    expect(err.message).toContain(`${file}:8: sources[1].id`);
    expect(err.message).toContain(`${file}:12: sink.flushMs`);
    expect(err.message).toContain('"Cam 2"');
  });

  it('rejects out-of-range values, naming the value and the bound', () => {
    const text = deployment(GOOD_SOURCE.replace('fps: 2', 'fps: 500'), 'bus:\n  partitions: 0\nbackend:\n  intraOpThreads: 0\n');
    const { err, issues } = invalid(() => parseConfig(deploymentSchema, text, file));
    expect(issues.map((i) => i.path).sort()).toEqual(['backend.intraOpThreads', 'bus.partitions', 'sources[0].fps']);
    const fps = issues.find((i) => i.path === 'sources[0].fps');
    expect(fps?.message).toContain('500');
    expect(fps?.message).toContain('120');
    const partitions = issues.find((i) => i.path === 'bus.partitions');
    expect(partitions?.line).toBe(3);
    expect(partitions?.message).toContain('0');
    expect(err.message).toContain('(3 problems)');
  });

  it('rejects an unknown enum value, listing the allowed ones', () => {
    const text = MODELS.replace('task: detect-objects', 'task: detect-cats');
    const { err, issues } = invalid(() => parseConfig(modelZooSchema, text, 'models.yaml'));
    expect(issues[0]).toMatchObject({ path: 'models[0].task', line: 3 });
    expect(err.message).toContain('"detect-cats"');
    expect(err.message).toContain('"detect-objects"');
    expect(err.message).toContain('"recognize-text"');
  });

  it('parses an app, filling edge defaults', () => {
    const app = parseConfig(appSpecSchema, TRAFFIC, 'traffic.yaml');
    expect(app.edges[0]).toEqual({ from: 'frames', to: 'detect', filter: {}, cropPadding: 0 });
    expect(app.queries).toEqual({});
    expect(Object.isFrozen(app.edges[0])).toBe(true);
  });
});

describe('loadModelZoo and loadApp', () => {
  it('loads a manifest, resolving relative model paths against it', () => {
    const dir = project({ 'models.yaml': MODELS.replace(CENTERNET, 'net.onnx'), 'net.onnx': 'x' });
    const models = loadModelZoo(join(dir, 'models.yaml'));
    expect(models.centernet?.file).toBe(join(dir, 'net.onnx'));
    expect(models.centernet?.maxBatch).toBe(8);
    expect(Object.isFrozen(models.centernet)).toBe(true);
  });

  it('rejects a model whose file does not exist, and duplicate names, at once', () => {
    const dir = project({ 'models.yaml': `${MODELS}${MODELS.replace('models:\n', '').replace(CENTERNET, 'missing.onnx')}` });
    const file = join(dir, 'models.yaml');
    const { err, issues } = invalid(() => loadModelZoo(file));
    expect(issues.map((i) => i.path).sort()).toEqual(['models[1].file', 'models[1].name']);
    expect(err.message).toContain(file);
    expect(err.message).toContain('"missing.onnx"');
    expect(err.message).toContain('duplicate');
  });

  it('takes a cheaper variant of a zoo model, and refuses one of a model it lacks or of another task', () => {
    const variant = (of: string, task = 'detect-objects') => `${MODELS}  - name: centernet-small\n    task: ${task}\n    architecture: centernet\n    file: ${CENTERNET}\n    inputSize: 256\n    labels: coco\n    variantOf: { model: ${of}, accuracy: 0.9 }\n    license: MIT\n`;
    const ok = loadModelZoo(join(project({ 'models.yaml': variant('centernet') }), 'models.yaml'));
    expect(ok['centernet-small']!.variantOf).toEqual({ model: 'centernet', accuracy: 0.9 });
    const unknown = invalid(() => loadModelZoo(join(project({ 'models.yaml': variant('yolo') }), 'models.yaml')));
    expect(unknown.issues).toMatchObject([{ path: 'models[1].variantOf.model' }]);
    expect(unknown.err.message).toContain('"yolo"');
    const otherTask = invalid(() => loadModelZoo(join(project({ 'models.yaml': variant('centernet', 'recognize-attributes') }), 'models.yaml')));
    expect(otherTask.err.message).toContain('expected another model with this one\'s task (recognize-attributes)');
  });

  it('BAD INPUT: a CenterNet input size that is not a multiple of 32 names the field', () => {
    const zoo = `${MODELS}  - name: centernet-300\n    task: detect-objects\n    architecture: centernet\n    file: ${CENTERNET}\n    inputSize: 300\n    labels: coco\n    license: MIT\n`;
    const { err, issues } = invalid(() => loadModelZoo(join(project({ 'models.yaml': zoo }), 'models.yaml')));
    expect(issues).toMatchObject([{ path: 'models[1].inputSize' }]);
    expect(err.message).toContain('got 300; expected a multiple of 32 for CenterNet');
  });

  it('says a missing manifest is not found', () => {
    expect(thrown(() => loadModelZoo(join(scratch, 'nowhere.yaml'))).code).toBe(ErrorCode.ConfigNotFound);
  });

  it('rejects an app node naming an unknown model, listing the zoo', () => {
    const dir = project();
    const models = loadModelZoo(join(dir, 'models.yaml'));
    const file = join(dir, 'apps/bad.yaml');
    writeFileSync(file, TRAFFIC.replace('model: centernet', 'model: yolo'));
    const { err, issues } = invalid(() => loadApp(file, models));
    expect(issues[0]).toMatchObject({ file, path: 'nodes[0].model' });
    expect(err.message).toContain(file);
    expect(err.message).toContain('"yolo"');
    expect(err.message).toContain('centernet');
  });

  it('checks a node\'s region and parse: a region of positive size, a valid pattern, a text recognizer to parse with', () => {
    const dir = project();
    const models = loadModelZoo(join(dir, 'models.yaml'));
    const file = join(dir, 'apps/hud.yaml');
    writeFileSync(file, TRAFFIC.replace('    model: centernet\n', "    model: centernet\n    region: { x1: 0.5, y1: 0, x2: 0.2, y2: 1 }\n    parse: { field: kills, pattern: '(\\d+' }\n"));
    const bad = invalid(() => parseConfig(appSpecSchema, readFileSync(file, 'utf8'), file));
    expect(bad.issues.map((i) => i.path)).toEqual(['nodes[0].region', 'nodes[0].parse.pattern']);
    writeFileSync(file, TRAFFIC.replace('    model: centernet\n', "    model: centernet\n    parse: { field: kills, pattern: '(\\d+)' }\n"));
    const detector = invalid(() => loadApp(file, models));
    expect(detector.issues.map((i) => i.path)).toEqual(['nodes[0].parse']);
    expect(detector.err.message).toContain('text recognizer');
  });

  it('checks a cache: on an object detector fed whole frames or an image classifier, not on a specialized node; each kind\'s keys and defaults', () => {
    const zoo = loadModelZoo();
    const app = (detector: object, classifier: object = {}, classifierModel = 'efficientnet-lite2') =>
      appSpecSchema.parse({
        name: 'cached',
        sloMs: 3000,
        nodes: [{ id: 'vehicles', model: 'centernet', ...detector }, { id: 'kind', model: classifierModel, ...classifier }],
        edges: [{ from: 'frames', to: 'vehicles' }, { from: 'vehicles', to: 'kind' }],
      });
    const good = app({ cache: {} }, { cache: { layers: [5, 10], explore: 100 } });
    expect(checkAppGraph(good, zoo)).toEqual([]);
    // The node keeps what the file says; its model's runner fills in the defaults of its kind.
    expect(good.nodes[1]!.cache).toEqual({ layers: [5, 10], explore: 100 });
    expect(cacheSchema.parse({})).toEqual({ layer: 4, grid: 64, accuracyTarget: 0.97, verifyRate: 0.1, maxAge: 25, pairsPerFrame: 3, window: 600, period: 100, minPairs: 60, falsePositiveWeight: 4, prior: true });
    expect(classifierCacheSchema.parse({})).toEqual({ explore: 300, maxClasses: 16, maxParameters: 1_000_000, memoryMB: 64, accuracyTarget: 0.97, falsePositiveWeight: 4, group: 100, sampled: 20, window: 300, period: 200, reexplore: 3000, lookups: 'sync' });
    const issues = (detector: object, classifier: object, model?: string) => checkAppGraph(app(detector, classifier, model), zoo).map((i) => `${i.path}: ${i.message}`);
    // A specialized node's cache is its oracle's (docs/learned-caches.md).
    expect(issues({}, { cache: {}, specialize: { templates: ['efficientnet-lite0'] } })).toEqual([]);
    expect(issues({}, { cache: { grid: 8 } })).toEqual(['nodes[1].cache: Unrecognized key: "grid" (a cache on efficientnet-lite: docs/learned-caches.md)']);
    expect(issues({ cache: { explore: 100 } }, {})).toEqual(['nodes[0].cache: Unrecognized key: "explore" (a cache on centernet: docs/learned-caches.md)']);
    expect(issues({}, { cache: { layers: [9] } }, 'faceres')).toEqual([]);
    expect(issues({}, { cache: {} }, 'face-identity')).toEqual([
      'nodes[1].cache: node "kind" runs face-identity; learned caches in apps run on object detectors (centernet), image classifiers (efficientnet-lite) and face attributes (faceres)',
    ]);
    const cropped = appSpecSchema.parse({
      name: 'cached',
      sloMs: 3000,
      nodes: [{ id: 'vehicles', model: 'centernet' }, { id: 'again', model: 'centernet', cache: {} }],
      edges: [{ from: 'frames', to: 'vehicles' }, { from: 'vehicles', to: 'again' }],
    });
    expect(checkAppGraph(cropped, zoo).map((i) => `${i.path}: ${i.message}`)).toEqual([
      'nodes[1].cache: node "again" is fed crops by "vehicles"; only a node fed by "frames" (and nothing else) can have a cache',
    ]);
    for (const [key, value] of [['accuracyTarget', 0], ['verifyRate', 2], ['maxAge', 0], ['explore', 5], ['bogus', 1]] as const) {
      const err = invalid(() => parseConfig(appSpecSchema, JSON.stringify({ name: 'cached', sloMs: 3000, nodes: [{ id: 'vehicles', model: 'centernet', cache: { [key]: value } }], edges: [{ from: 'frames', to: 'vehicles' }] }), 'cached.yaml'));
      expect(err.issues.map((i) => i.path)).toEqual([`nodes[0].cache.${key}`]);
    }
  });

  it('checks a specialized node: a classifier as its oracle, cheaper zoo classifiers as templates; WEG\'s defaults are the thesis\'', () => {
    const zoo = loadModelZoo();
    const app = (kind: object) =>
      appSpecSchema.parse({
        name: 'kinds',
        sloMs: 3000,
        nodes: [{ id: 'vehicles', model: 'centernet' }, { id: 'kind', model: 'efficientnet-lite2', ...kind }],
        edges: [{ from: 'frames', to: 'vehicles' }, { from: 'vehicles', to: 'kind' }],
      });
    const good = app({ specialize: { templates: ['efficientnet-lite0'] } });
    expect(checkAppGraph(good, zoo)).toEqual([]);
    expect(good.nodes[1]!.specialize).toEqual({
      templates: ['efficientnet-lite0'],
      workload: 'objects',
      oracleAccuracy: 1,
      accuracyMargin: -0.05,
      minWindow: 30,
      sameClasses: 2,
      epsilon: 0.01,
      maxDisagreement: 0.5,
      poolRowsPerClass: 20,
      poolClasses: 64,
    });
    const issues = checkAppGraph(app({ model: 'centernet', specialize: { templates: ['efficientnet-lite0', 'nope', 'faceres', 'efficientnet-lite0'] } }), zoo);
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'nodes[1].specialize: node "kind" runs centernet, which is not a classifier (an image classifier with a labelsFile, or a face-identity model); the oracle of a specialized node is one',
      'nodes[1].specialize.templates[1]: got "nope"; expected a model from the zoo: ' + Object.keys(zoo).join(', '),
      'nodes[1].specialize.templates[2]: got "faceres", which is not a classifier; a template is a cheaper classifier with a `features` output (e.g. efficientnet-lite0, mobileface)',
      'nodes[1].specialize.templates[3]: template "efficientnet-lite0" is listed twice',
    ]);
    expect(checkAppGraph(app({ specialize: { templates: ['efficientnet-lite2'] } }), zoo)[0]!.message).toContain('the oracle itself');
    // A face template for an ImageNet oracle, and the other way round, answer different things.
    expect(checkAppGraph(app({ specialize: { templates: ['mobileface'] } }), zoo).map((i) => i.message)).toEqual([
      'got "mobileface" (face-embedding model) for efficientnet-lite2 (image classifier): a template answers what its oracle does',
    ]);
    expect(checkAppGraph(app({ model: 'face-identity', specialize: { templates: ['mobileface'], workload: 'faces' } }), zoo)).toEqual([]);
    // FaceRes classifies (age, gender) but has no class list: not an oracle to specialize.
    expect(checkAppGraph(app({ model: 'faceres', specialize: { templates: ['efficientnet-lite0'] } }), zoo)[0]!.path).toBe('nodes[1].specialize');
    // The thesis' +0.05 with a* = 1: no cascade reaches 1.05, so it is refused rather than never specializing.
    const unreachable = checkAppGraph(app({ specialize: { templates: ['efficientnet-lite0'], accuracyMargin: 0.05 } }), zoo);
    expect(unreachable.map((i) => i.path)).toEqual(['nodes[1].specialize.accuracyMargin']);
    expect(checkAppGraph(app({ specialize: { templates: ['efficientnet-lite0'], oracleAccuracy: 0.8, accuracyMargin: 0.05 } }), zoo)).toEqual([]);
    for (const [key, value] of [['templates', []], ['minWindow', 1], ['poolRowsPerClass', 5], ['poolRowsPerClass', 1000], ['epsilon', 0], ['trainingSkew', 1], ['bogus', 1]] as const) {
      const specialize = { templates: ['efficientnet-lite0'], [key]: value };
      const err = invalid(() => parseConfig(appSpecSchema, JSON.stringify({ name: 'kinds', sloMs: 3000, nodes: [{ id: 'kind', model: 'efficientnet-lite2', specialize }], edges: [{ from: 'frames', to: 'kind' }] }), 'kinds.yaml'));
      expect(err.issues.map((i) => i.path)).toEqual([`nodes[0].specialize.${key}`]);
    }
    // The scheduler plans each template as a node of its own, fed by the specialized node's parents and feeding it.
    expect(scheduledGraph(app({ specialize: { templates: ['efficientnet-lite0', 'mobileface'] } }))).toEqual({
      nodes: [
        { id: 'vehicles', model: 'centernet' },
        { id: 'kind', model: 'efficientnet-lite2' },
        { id: 'kind~efficientnet-lite0', model: 'efficientnet-lite0' },
        { id: 'kind~mobileface', model: 'mobileface' },
      ],
      edges: [
        { from: 'frames', to: 'vehicles' },
        { from: 'vehicles', to: 'kind' },
        { from: 'vehicles', to: 'kind~efficientnet-lite0' },
        { from: 'vehicles', to: 'kind~mobileface' },
        { from: 'kind~efficientnet-lite0', to: 'kind' },
        { from: 'kind~mobileface', to: 'kind' },
      ],
    });
    expect(() => app({ specialize: { templates: [], minWindow: 1, poolRowsPerClass: 5, bogus: 1 } })).toThrow(/templates[\s\S]*minWindow[\s\S]*poolRowsPerClass|bogus/);
  });

  it('checks the DAG: unknown edge target, an edge given twice, cycle, unreachable node; a second input is fan-in', () => {
    const dir = project();
    const models = loadModelZoo(join(dir, 'models.yaml'));
    const app = (name: string, graph: string): string => {
      const file = join(dir, `apps/${name}.yaml`);
      writeFileSync(file, `name: ${name}\nsloMs: 900\n${graph}`);
      return file;
    };
    const nodes = 'nodes:\n  - { id: a, model: centernet }\n  - { id: b, model: centernet }\n';

    const unknown = invalid(() => loadApp(app('unknown', `${nodes}edges:\n  - { from: frames, to: a }\n  - { from: a, to: b }\n  - { from: a, to: c }\n`), models));
    expect(unknown.issues.map((i) => i.path)).toEqual(['edges[2].to']);
    expect(unknown.err.message).toContain('"c"');

    const unknownFrom = invalid(() => loadApp(app('unknown-from', `${nodes}edges:\n  - { from: frames, to: a }\n  - { from: z, to: b }\n`), models));
    expect(unknownFrom.issues.map((i) => i.path)).toContain('edges[1].from');

    const twoInputs = loadApp(app('two-inputs', `${nodes}edges:\n  - { from: frames, to: a }\n  - { from: frames, to: b }\n  - { from: a, to: b }\n`), models);
    expect(twoInputs.edges.filter((e) => e.to === 'b').map((e) => e.from)).toEqual(['frames', 'a']);

    const twice = invalid(() => loadApp(app('twice', `${nodes}edges:\n  - { from: frames, to: a }\n  - { from: a, to: b }\n  - { from: a, to: b }\n`), models));
    expect(twice.issues.map((i) => i.path)).toEqual(['edges[2]']);
    expect(twice.err.message).toContain('given twice');

    const loop = invalid(() => loadApp(app('loop', `${nodes}edges:\n  - { from: frames, to: a }\n  - { from: a, to: b }\n  - { from: b, to: a }\n`), models));
    expect(loop.issues.map((i) => i.path).sort()).toEqual(['nodes[0].id']);
    expect(loop.err.message).toContain('acyclic');

    const cycle = invalid(() => loadApp(app('cycle', `${nodes}edges:\n  - { from: a, to: b }\n  - { from: b, to: a }\n`), models));
    expect(cycle.issues.map((i) => i.path).sort()).toEqual(['nodes[0].id', 'nodes[1].id']);
    expect(cycle.err.message).toContain('frames');

    const unreachable = invalid(() => loadApp(app('unreachable', `${nodes}edges:\n  - { from: frames, to: a }\n`), models));
    expect(unreachable.issues.map((i) => i.path)).toEqual(['nodes[1].id']);
    expect(unreachable.err.message).toContain('"b"');

    const ok = loadApp(app('chain', `${nodes}edges:\n  - { from: frames, to: a }\n  - { from: a, to: b, filter: { classes: [car] } }\n`), models);
    expect(ok.edges[1]?.filter).toEqual({ classes: ['car'] });
  });
});

describe('loadDeployment', () => {
  it('loads a deployment with its apps and models, resolved and frozen', () => {
    const dir = project({ 'deploy.yaml': deployment(GOOD_SOURCE) });
    const config = loadDeployment(join(dir, 'deploy.yaml'));
    expect(config.file).toBe(join(dir, 'deploy.yaml'));
    expect(Object.keys(config.apps)).toEqual(['traffic']);
    expect(config.models.centernet?.file).toBe(CENTERNET);
    expect(config.sources.map((s) => s.path)).toEqual([join(dir, 'clip.mp4')]);
    expect(config.skipped).toEqual([]);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.sources[0])).toBe(true);
    expect(Object.isFrozen(config.apps.traffic?.nodes[0])).toBe(true);
    expect(() => {
      (config.apps as Record<string, unknown>).other = {};
    }).toThrow(TypeError);
  });

  it('takes the environment overrides once, at compile time: what the compiled config says is what runs', () => {
    const servers = 'bus: { kind: kafka, brokers: ["kafka.internal:9092"] }\nsink: { kind: clickhouse, url: "http://ch.internal:8123" }\n';
    const streamer = '  - id: streamer\n    twitch: { channel: some_channel, clientId: from-file }\n    apps: [traffic]\n';
    const dir = project({ 'deploy.yaml': deployment(streamer, servers) });
    const env = { PANOPTES_KAFKA_BROKERS: '127.0.0.1:19092,127.0.0.1:29092', PANOPTES_CLICKHOUSE_URL: 'http://127.0.0.1:18123', PANOPTES_TWITCH_OAUTH_TOKEN: 'token-from-env' };
    const config = loadDeployment(join(dir, 'deploy.yaml'), { env });
    expect(config.deployment.bus).toMatchObject({ kind: 'kafka', brokers: ['127.0.0.1:19092', '127.0.0.1:29092'] });
    expect(config.deployment.sink).toMatchObject({ kind: 'clickhouse', url: 'http://127.0.0.1:18123' });
    expect(config.sources[0]?.twitch).toMatchObject({ clientId: 'from-file', oauthToken: 'token-from-env' });
    // Without them, the file's settings.
    const plain = loadDeployment(join(dir, 'deploy.yaml'), { env: {} });
    expect(plain.deployment.bus).toMatchObject({ brokers: ['kafka.internal:9092'] });
    expect(plain.sources[0]?.twitch).not.toHaveProperty('oauthToken');
  });

  it('rejects a source naming an app that does not exist', () => {
    const dir = project({ 'deploy.yaml': deployment(GOOD_SOURCE.replace('apps: [traffic]', 'apps: [traffic, parking]')) });
    const file = join(dir, 'deploy.yaml');
    const { err, issues } = invalid(() => loadDeployment(file));
    expect(issues.map((i) => i.path)).toEqual(['sources[0].apps[1]']);
    const line = readFileSync(file, 'utf8').split('\n').findIndex((l) => l.includes('parking')) + 1;
    expect(err.message).toContain(`${file}:${line}: sources[0].apps[1]`);
    expect(err.message).toContain('"parking"');
    expect(err.message).toContain('traffic');
  });

  it("adds an app to the sources its `sources` names, by id or pattern, and refuses a source no app analyzes", () => {
    const selecting = TRAFFIC.replace('sloMs: 1500', 'sources: [cam-*, lobby]\nsloMs: 1500');
    const unlisted = (id: string): string => GOOD_SOURCE.replace('cam-1', id).replace('    apps: [traffic]\n', '');
    const dir = project({ 'apps/traffic.yaml': selecting, 'deploy.yaml': deployment(`${GOOD_SOURCE}${unlisted('cam-2')}${unlisted('lobby')}`) });
    expect(loadDeployment(join(dir, 'deploy.yaml')).sources.map((s) => [s.id, s.apps])).toEqual([['cam-1', ['traffic']], ['cam-2', ['traffic']], ['lobby', ['traffic']]]);

    const orphan = project({ 'apps/traffic.yaml': selecting, 'deploy.yaml': deployment(unlisted('yard')) });
    const { err, issues } = invalid(() => loadDeployment(join(orphan, 'deploy.yaml')));
    expect(issues.map((i) => i.path)).toEqual(['sources[0].apps']);
    expect(err.message).toContain('source "yard" is analyzed by no app');
  });

  it('rejects an app of the deployment whose node names an unknown model', () => {
    const dir = project({ 'apps/traffic.yaml': TRAFFIC.replace('model: centernet', 'model: ghost'), 'deploy.yaml': deployment(GOOD_SOURCE) });
    const { err, issues } = invalid(() => loadDeployment(join(dir, 'deploy.yaml')));
    expect(issues[0]).toMatchObject({ file: join(dir, 'apps/traffic.yaml'), path: 'nodes[0].model' });
    expect(err.message).toContain('"ghost"');
  });

  it('rejects duplicate source ids', () => {
    const dir = project({ 'deploy.yaml': deployment(`${GOOD_SOURCE}${GOOD_SOURCE}`) });
    expect(invalid(() => loadDeployment(join(dir, 'deploy.yaml'))).issues.map((i) => i.path)).toEqual(['sources[1].id']);
  });

  it('skips an optional source whose file is missing and lists it in `skipped`', () => {
    const missing = GOOD_SOURCE.replace('cam-1', 'cam-2').replace('clip.mp4', 'gone.mp4');
    const dir = project({ 'deploy.yaml': deployment(`${GOOD_SOURCE}${missing}    optional: true\n`) });
    const config = loadDeployment(join(dir, 'deploy.yaml'));
    expect(config.sources.map((s) => s.id)).toEqual(['cam-1']);
    expect(config.skipped).toHaveLength(1);
    expect(config.skipped[0]?.id).toBe('cam-2');
    expect(config.skipped[0]?.reason).toContain(join(dir, 'gone.mp4'));
  });

  it('rejects the same missing file when the source is not optional', () => {
    const missing = GOOD_SOURCE.replace('cam-1', 'cam-2').replace('clip.mp4', 'gone.mp4');
    const dir = project({ 'deploy.yaml': deployment(`${GOOD_SOURCE}${missing}`) });
    const { err, issues } = invalid(() => loadDeployment(join(dir, 'deploy.yaml')));
    expect(issues.map((i) => i.path)).toEqual(['sources[1].path']);
    expect(err.message).toContain('"gone.mp4"');
  });

  it('checks local analysis names object detectors from the zoo', () => {
    const withLocal = (local: string): string => `${deployment(GOOD_SOURCE)}ingest:\n  localAnalysis: ${local}\n`;
    const ok = loadDeployment(join(project({ 'deploy.yaml': withLocal('{ model: centernet }') }), 'deploy.yaml'));
    expect(ok.deployment.ingest.localAnalysis).toEqual({ model: 'centernet', maxBadRate: 0.05, holdS: 5 });
    const { err, issues } = invalid(() => loadDeployment(join(project({ 'deploy.yaml': withLocal('{ model: tiny, replaces: centernet }') }), 'deploy.yaml')));
    expect(issues.map((i) => i.path)).toEqual(['ingest.localAnalysis.model']);
    expect(err.message).toContain('"tiny"');
  });

  it('runs models in stages only under on-time batching, and not where a node has a cache', () => {
    const withBackend = (backend: string, files: Record<string, string> = {}): string =>
      join(project({ 'deploy.yaml': `${deployment(GOOD_SOURCE)}backend: ${backend}\n`, ...files }), 'deploy.yaml');
    expect(loadDeployment(withBackend('{ batching: on-time, stages: 3 }')).deployment.backend).toMatchObject({ batching: 'on-time', stages: 3 });
    const window = invalid(() => loadDeployment(withBackend('{ stages: 3 }')));
    expect(window.err.message).toContain('backend.stages: got 3; models run in stages only with `batching: on-time`');
    const cached = invalid(() => loadDeployment(withBackend('{ batching: on-time, stages: 2 }', { 'apps/traffic.yaml': TRAFFIC.replace('    model: centernet\n', '    model: centernet\n    cache: {}\n') })));
    expect(cached.err.message).toContain(`app traffic's node "detect" has a cache`);
  });

  it('leaves URLs and synthetic sources alone', () => {
    const sources = `  - id: live\n    path: rtsp://camera.local/stream\n    apps: [traffic]\n  - id: synth\n    synthetic: { lavfi: testsrc2, durationS: 2 }\n    apps: [traffic]\n`;
    const dir = project({ 'deploy.yaml': deployment(sources) });
    const config = loadDeployment(join(dir, 'deploy.yaml'));
    expect(config.sources.map((s) => s.path)).toEqual(['rtsp://camera.local/stream', undefined]);
  });

  it('resolves dataDir against the working directory, and the option overrides it', () => {
    const dir = project({ 'deploy.yaml': deployment(GOOD_SOURCE, 'dataDir: ./results\n') });
    const file = join(dir, 'deploy.yaml');
    expect(loadDeployment(file).dataDir).toBe(resolve('./results'));
    expect(loadDeployment(file, { dataDir: join(dir, 'elsewhere') }).dataDir).toBe(join(dir, 'elsewhere'));
    expect(loadDeployment(file, { dataDir: 'rel/dir' }).dataDir).toBe(resolve('rel/dir'));
  });

  it('says a missing deployment or models manifest is not found', () => {
    expect(thrown(() => loadDeployment(join(scratch, 'nowhere.yaml'))).code).toBe(ErrorCode.ConfigNotFound);
    const dir = project({ 'deploy.yaml': deployment(GOOD_SOURCE, 'models: zoo.yaml\n') });
    expect(thrown(() => loadDeployment(join(dir, 'deploy.yaml'))).code).toBe(ErrorCode.ConfigNotFound);
  });

  it('loads the committed configs/demo.yaml and configs/models.yaml', () => {
    const demo = loadDeployment(join(root, 'configs/demo.yaml'));
    expect(Object.keys(demo.apps)).toEqual(['traffic', 'game', 'billboard']);
    expect(demo.sources.map((s) => s.id)).toContain('synthetic-testcard');
    const ids = [...demo.sources.map((s) => s.id), ...demo.skipped.map((s) => s.id)].sort();
    expect(ids).toEqual(['car-detection', 'game-hud', 'lobby', 'person-bicycle-car', 'synthetic-testcard', 'walkway']);
    const models = loadModelZoo();
    expect(Object.keys(models).sort()).toEqual(['blazeface', 'centernet', 'centernet-256', 'centernet-384', 'efficientnet-lite0', 'efficientnet-lite0-128', 'efficientnet-lite2', 'face-identity', 'facemesh', 'faceres', 'mobileface', 'ppocr-det', 'ppocr-rec']);
    expect(models['ppocr-rec']?.charset).toMatch(/ppocr_keys_v1\.txt$/);
  });
});

describe('configJsonSchema', () => {
  const kinds = Object.keys(CONFIG_KINDS) as ConfigKind[];

  it('covers deployments, apps and model manifests', () => {
    expect([...kinds].sort()).toEqual(['app', 'deployment', 'models']);
  });

  it.each(kinds)('%s is a strict JSON Schema object', (kind) => {
    const schema = configJsonSchema(kind);
    expect(schema.$schema).toMatch(/json-schema\.org/);
    expect(schema.type).toBe('object');
    expect(schema.additionalProperties).toBe(false);
  });

  it('forbids unknown keys on a source and knows its keys', () => {
    const schema = configJsonSchema('deployment') as { properties: { sources: { items: { additionalProperties: unknown; properties: object; required: string[] } } } };
    const source = schema.properties.sources.items;
    expect(source.additionalProperties).toBe(false);
    expect(Object.keys(source.properties)).toEqual(SOURCE_KEYS);
    expect(source.required).toEqual(['id']);
  });

  it.each(kinds)('docs/schema/%s.json is up to date (npx panoptes config schema <kind>)', (kind) => {
    const committed = readFileSync(join(root, 'docs/schema', `${kind}.json`), 'utf8');
    expect(committed).toBe(`${JSON.stringify(configJsonSchema(kind), null, 2)}\n`);
  });
});
