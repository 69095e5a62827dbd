/**
 * Configuration files as a careless or hostile hand writes them: names that are also an
 * object's inherited keys, two apps of one name, a source pattern that would backtrack for
 * minutes, a device where a file should be, values whose timers cannot wait that long.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MODEL_PARAMS } from '../../analyzers/index.js';
import { ErrorCode, loadDeployment, loadModelZoo, matchesId, projectRoot, type CompileOptions, type ConfigIssue } from '../../core/index.js';
import { thrown } from '../helpers.js';

const scratch = mkdtempSync(join(tmpdir(), 'panoptes-config-hostile-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;

const model = (name: string): string => `  - { name: ${name}, task: detect-objects, architecture: centernet, file: ${join(projectRoot(), 'models/centernet.onnx')}, inputSize: 512, labels: coco, license: MIT }\n`;
const app = (name: string, modelName = 'centernet', extra = ''): string => `name: ${name}\nsloMs: 1500\n${extra}nodes:\n  - { id: detect, model: ${modelName} }\nedges:\n  - { from: frames, to: detect }\n`;

/** A folder with the files given, and the deployment `deploy.yaml` loaded from it (or the error). */
function load(files: Record<string, string>, options: CompileOptions = {}): ReturnType<typeof loadDeployment> {
  const dir = join(scratch, `p${++dirs}`);
  mkdirSync(dir, { recursive: true });
  const all = { 'models.yaml': `models:\n${model('centernet')}`, 'clip.mp4': 'not really a video', ...files };
  for (const [name, text] of Object.entries(all)) writeFileSync(join(dir, name), text);
  return loadDeployment(join(dir, 'deploy.yaml'), options);
}
const source = (apps: string, extra = ''): string => `sources:\n  - { id: cam, path: clip.mp4, apps: [${apps}]${extra} }\n`;

function issuesOf(fn: () => unknown): ConfigIssue[] {
  const err = thrown(fn);
  expect(err.code).toBe(ErrorCode.ConfigInvalid);
  return err.details.issues as ConfigIssue[];
}

describe('hostile configuration', () => {
  it('looks names up, never inherits them: an app or a model named "constructor"', () => {
    const noApp = issuesOf(() => load({ 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\n${source('constructor')}`, 'a.yaml': app('det') }));
    expect(noApp.map((i) => i.path)).toEqual(['sources[0].apps[0]']);
    const noModel = thrown(() => load({ 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\n${source('det')}`, 'a.yaml': app('det', 'constructor') }));
    expect(noModel.message).toContain('nodes[0].model: got "constructor"');
    // A zoo may name a model so: it is not a duplicate of anything.
    const dir = join(scratch, 'zoo');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'models.yaml'), `models:\n${model('constructor')}`);
    expect(Object.keys(loadModelZoo(join(dir, 'models.yaml')))).toEqual(['constructor']);
  });

  it('refuses two app files of one name, naming both, instead of keeping the last', () => {
    const issues = issuesOf(() => load({ 'deploy.yaml': `models: models.yaml\napps: [a.yaml, b.yaml]\n${source('det')}`, 'a.yaml': app('det'), 'b.yaml': app('det') }));
    expect(issues).toEqual([expect.objectContaining({ path: 'apps[1]', message: 'b.yaml is named "det", as a.yaml is; each app needs a name of its own' })]);
  });

  it("matches a source pattern in time linear in the id: a pattern that would backtrack for minutes answers at once", () => {
    expect(matchesId('cam-*', 'cam-1')).toBe(true);
    expect(matchesId('cam-*', 'xcam-1')).toBe(false);
    expect(matchesId('*', '')).toBe(true);
    expect(matchesId('a*b*c', 'abc')).toBe(true);
    expect(matchesId('a*b*c', 'a-b-b-c')).toBe(true);
    expect(matchesId('a*b*c', 'acb')).toBe(false);
    expect(matchesId('ab*ba', 'aba')).toBe(false); // the parts may not overlap
    expect(matchesId('cam.1', 'camx1')).toBe(false); // "." is itself
    const started = performance.now();
    expect(matchesId(`${'*a'.repeat(30)}*b`, `${'a'.repeat(119)}c`)).toBe(false);
    expect(performance.now() - started).toBeLessThan(100);
    const selected = load({ 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\nsources:\n  - { id: ${'a'.repeat(100)}c, path: clip.mp4, apps: [] }\n`, 'a.yaml': app('det', 'centernet', `sources: ['${'*a'.repeat(30)}*c']\n`) });
    expect(selected.sources[0]?.apps).toEqual(['det']);
  });

  it('reads no device or folder as a configuration file; a pipe (a process substitution) it reads', async () => {
    const err = thrown(() => load({ 'deploy.yaml': `models: models.yaml\napps: [/dev/zero]\n${source('det')}` }));
    expect(err.code).toBe(ErrorCode.ConfigNotFound);
    expect(err.message).toBe('cannot read configuration file /dev/zero: it is not a regular file');
    const dir = join(scratch, 'pipe');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'a.yaml'), app('det'));
    writeFileSync(join(dir, 'models.yaml'), `models:\n${model('centernet')}`);
    writeFileSync(join(dir, 'clip.mp4'), 'not really a video');
    writeFileSync(join(dir, 'deploy.yaml'), `models: ${join(dir, 'models.yaml')}\napps: [${join(dir, 'a.yaml')}]\nsources:\n  - { id: cam, path: ${join(dir, 'clip.mp4')}, apps: [det] }\n`);
    const pipe = join(dir, 'deploy.fifo');
    execFileSync('mkfifo', [pipe]);
    // Another process writes the pipe, as a shell's process substitution does; the load reads it synchronously.
    const writer = spawn('sh', ['-c', `cat '${join(dir, 'deploy.yaml')}' > '${pipe}'`]);
    const written = new Promise((resolve) => writer.once('exit', resolve));
    expect(loadDeployment(pipe).sources.map((s) => s.id)).toEqual(['cam']);
    expect(await written).toBe(0);
  });

  it('says what a value is and what was expected: NaN and Infinity, a date without its time, a sample of no form', () => {
    const files = { 'a.yaml': app('det') };
    const messages = issuesOf(() =>
      load({ ...files, 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\nsources:\n  - { id: a, path: clip.mp4, apps: [det], fps: .inf, startTime: 2026-05-01 }\n  - { id: b, path: clip.mp4, apps: [det], sample: {} }\n` }),
    ).map((i) => `${i.path}: ${i.message}`);
    expect(messages).toEqual([
      'sources[0].fps: got Infinity; expected a finite number',
      'sources[0].startTime: got "2026-05-01"; expected an ISO 8601 date and time, e.g. 2026-05-01T08:00:00Z',
      'sources[1].sample: got {}; expected everyNth: number; or keyframes: true; or sceneChange: number',
    ]);
  });

  it('refuses values a timer cannot wait, an empty dataDir and ids too long for a file name', () => {
    const files = { 'a.yaml': app('det') };
    expect(issuesOf(() => load({ ...files, 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\n${source('det', ', speed: 1e-300')}` })).map((i) => i.path)).toEqual(['sources[0].speed']);
    expect(issuesOf(() => load({ ...files, 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\nsink: { kind: chdb, flushMs: 3000000000 }\n${source('det')}` })).map((i) => i.path)).toEqual(['sink.flushMs']);
    expect(issuesOf(() => load({ ...files, 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\ndataDir: ""\n${source('det')}` })).map((i) => i.path)).toEqual(['dataDir']);
    const longId = `sources:\n  - { id: ${'a'.repeat(300)}, path: clip.mp4, apps: [det] }\n`;
    expect(issuesOf(() => load({ ...files, 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\n${longId}` })).map((i) => i.path)).toEqual(['sources[0].id']);
  });

  it("checks a node's params before any model loads: each problem at its key and line, worded as the file's own", () => {
    const deploy = `models: models.yaml\napps: [a.yaml]\n${source('det')}`;
    const withParams = (params: string, extra = ''): string => `name: det\nsloMs: 1500\nnodes:\n  - id: detect\n    model: centernet\n    params:\n${params}${extra}edges:\n  - { from: frames, to: detect }\n`;
    const checked = (text: string): ConfigIssue[] => issuesOf(() => load({ 'a.yaml': text, 'deploy.yaml': deploy }, { params: MODEL_PARAMS }));
    const issues = checked(withParams('      minScore: 0.3\n      minScroe: 0.5\n      minScores: { person: 1.5 }\n'));
    expect(issues.map(({ line, path }) => ({ line, path }))).toEqual([
      { line: 9, path: 'nodes[0].params.minScores.person' },
      { line: 8, path: 'nodes[0].params.minScroe' },
    ]);
    expect(issues[0]!.message).toBe('got 1.5; expected ≤ 1');
    expect(issues[1]!.message).toMatch(/^unknown key "minScroe"; expected one of: minScore, minScores, /);
    const unknownClass = checked(withParams('      classes: [car, unicorn]\n'));
    expect(unknownClass).toMatchObject([{ line: 7, path: 'nodes[0].params.classes[1]', message: 'got "unicorn"; expected a class centernet knows (coco names)' }]);
    // A cache's problems are the cache's, said once.
    const cache = checked(withParams('      minScore: 0.3\n', '    cache: { layer: 1, maxClasses: 3 }\n'));
    expect(cache.map((i) => i.path)).toEqual(['nodes[0].cache']);
    expect(load({ 'a.yaml': withParams('      minScore: 0.3\n      classes: [car]\n'), 'deploy.yaml': deploy }, { params: MODEL_PARAMS }).apps.det).toBeDefined();
  });

  it('refuses an architecture no runner exists for, in the zoo, once', () => {
    const zoo = `models:\n${model('centernet').replace('architecture: centernet', 'architecture: yolo-v8')}`;
    const issues = issuesOf(() => load({ 'models.yaml': zoo, 'a.yaml': app('det'), 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\n${source('det')}` }, { params: MODEL_PARAMS }));
    expect(issues).toMatchObject([{ file: expect.stringMatching(/models\.yaml$/), path: 'models[0].architecture', message: expect.stringMatching(/^got "yolo-v8"; expected one of: centernet, /) }]);
  });

  it("refuses a local model that would not take the params of the nodes it runs in their place", () => {
    const zoo = `models:\n${model('centernet')}  - { name: faces, task: detect-objects, architecture: blazeface, file: ${join(projectRoot(), 'models/centernet.onnx')}, license: MIT }\n`;
    const detect = app('det').replace('{ id: detect, model: centernet }', '{ id: detect, model: centernet, params: { classes: [car] } }');
    const deploy = `models: models.yaml\napps: [a.yaml]\ningest: { localAnalysis: { model: faces, replaces: centernet } }\n${source('det')}`;
    const issues = issuesOf(() => load({ 'models.yaml': zoo, 'a.yaml': detect, 'deploy.yaml': deploy }, { params: MODEL_PARAMS }));
    expect(issues).toMatchObject([{ path: 'ingest.localAnalysis.model', message: expect.stringMatching(/^faces runs node "detect" of app det in its place, with that node's params\.classes: unknown key "classes"/) }]);
  });

  it('names the deployment key of a missing app file', () => {
    const err = thrown(() => load({ 'a.yaml': app('det'), 'deploy.yaml': `models: models.yaml\napps: [a.yaml, gone.yaml]\n${source('det, gone')}` }));
    expect(err.code).toBe(ErrorCode.ConfigNotFound);
    // Only that: the source naming the missing app is not judged without it.
    expect(err.details.issues).toMatchObject([{ path: 'apps[1]', line: 2, message: expect.stringMatching(/got "gone\.yaml"; expected an existing app file/) }]);
  });

  it('refuses a list or a map as a key, which YAML allows and no configuration has', () => {
    const warnings: unknown[] = [];
    const onWarning = (w: unknown): number => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const issues = issuesOf(() => load({ 'a.yaml': app('det'), 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\nsources:\n  - id: cam\n    ? { x: 1 }\n    : 1\n` }));
      expect(issues).toMatchObject([{ line: 5, path: 'sources[0]', message: 'a key must be a plain name, not a list or a map' }]);
      // An alias of a plain value is a plain key: judged by the schema as any key is.
      const alias = issuesOf(() => load({ 'a.yaml': app('det'), 'deploy.yaml': `models: &m models.yaml\napps: [a.yaml]\n${source('det')}sink: { kind: chdb, *m : 1 }\n` }));
      expect(alias.map((i) => i.message)).toEqual([expect.stringMatching(/^unknown key "models\.yaml"/)]);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toEqual([]);
  });

  it("refuses a model file that is not a regular file, an npm: path out of its package, and a detector's input side past 2048", () => {
    const zoo = (line: string): ConfigIssue[] => issuesOf(() => load({ 'a.yaml': app('det'), 'models.yaml': `models:\n${line}`, 'deploy.yaml': `models: models.yaml\napps: [a.yaml]\n${source('det')}` }));
    const entry = (file: string, inputSize = 512): string => `  - { name: centernet, task: detect-objects, architecture: centernet, file: "${file}", inputSize: ${inputSize}, labels: coco, license: MIT }\n`;
    expect(zoo(entry('/dev/zero'))).toMatchObject([{ path: 'models[0].file', message: expect.stringMatching(/expected an existing file/) }]);
    expect(zoo(entry(scratch))).toMatchObject([{ path: 'models[0].file' }]);
    for (const escape of ['npm:../../etc/passwd', 'npm:onnxruntime-node/../../package.json', 'npm:@scope/x/./y']) {
      expect(zoo(entry(escape)), escape).toMatchObject([{ path: 'models[0].file', message: expect.stringMatching(/expected npm:<package>\/<file inside it>/) }]);
    }
    expect(zoo(entry(join(projectRoot(), 'models/centernet.onnx'), 4096))).toMatchObject([{ path: 'models[0].inputSize' }]);
  });
});
