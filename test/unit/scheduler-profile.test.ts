import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  compileProfile,
  linearProfile,
  loadProfileFile,
  loadProfiles,
  profileLookup,
  profileWarnings,
  warningsFor,
  type BatchProfile,
} from '../../scheduler/index.js';

const profile = (batches: [number, number, number?][]): BatchProfile => ({
  version: 1,
  model: 'resnet',
  device: 'k80',
  batches: batches.map(([batch, latencyMs, stdMs = 0]) => ({ batch, latencyMs, stdMs, memoryMB: 100 * batch })),
});

describe('batch profiles', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const folder = (files: Record<string, unknown>): string => {
    const dir = mkdtempSync(join(tmpdir(), 'panoptes-profiles-'));
    dirs.push(dir);
    for (const [name, content] of Object.entries(files)) {
      writeFileSync(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
    }
    return dir;
  };

  it('ℓ(b) is mean + 1 std, linear between measured batches and extended below them, Infinity above', () => {
    const compiled = compileProfile(profile([
      [4, 50, 2],
      [8, 70, 6],
    ]));
    expect([1, 2, 4, 5, 6, 8, 9].map((b) => compiled.latency(b))).toEqual([34, 40, 52, 58, 64, 76, Infinity]);
    expect([1, 6, 8, 9].map((b) => compiled.memoryMB(b))).toEqual([100, 600, 800, Infinity]);
    expect(compiled.maxBatch).toBe(8);
  });

  it('below the smallest measured batch, the line stays within what the packer assumes: ℓ(b) ≤ ℓ(b₀), ℓ(b)/b ≥ ℓ(b₀)/b₀', () => {
    // Steep: the line would reach −5 ms at batch 1; the share of batch 2's time is the floor.
    expect(compileProfile(profile([[2, 10], [4, 40]])).latency(1)).toBe(5);
    // Falling (a bad profile): never above the smallest measured batch's time.
    expect(compileProfile(profile([[2, 10], [4, 8]])).latency(1)).toBe(10);
    // One measured batch: its time.
    expect(compileProfile(profile([[4, 20]])).latency(1)).toBe(20);
  });

  it('measurements in any order; pre- and post-processing add up to the overhead', () => {
    const compiled = compileProfile({ ...profile([[8, 70], [4, 50]]), preprocessMs: 3, postprocessMs: 2 });
    expect(compiled.latency(6)).toBe(60);
    expect(compiled.overheadMs).toBe(5);
  });

  it('the linear model ℓ(b) = α·b + β (Eq. 1)', () => {
    const compiled = compileProfile(linearProfile({ model: 'm', alphaMs: 0.6, betaMs: 5.6, maxBatch: 32, memory: { baseMB: 90, perItemMB: 10 } }));
    expect(compiled.latency(1)).toBeCloseTo(6.2, 9);
    expect(compiled.latency(32)).toBeCloseTo(24.8, 9);
    expect(compiled.memoryMB(32)).toBe(410);
  });

  it('warns when ℓ(b) decreases or ℓ(b)/b increases', () => {
    expect(profileWarnings(profile([[1, 10], [2, 15], [4, 20]]))).toEqual([]);
    expect(profileWarnings(profile([[1, 10], [2, 9]]))).toEqual(['resnet on k80: latency decreases from 10 ms at batch 1 to 9 ms at batch 2']);
    expect(profileWarnings(profile([[1, 10], [2, 25]]))).toEqual([
      'resnet on k80: latency per request rises from 10 ms at batch 1 to 12.5 ms at batch 2',
    ]);
  });

  it('loads a directory, one file per (device, model); files without a version are version 1', () => {
    const path = folder({
      'resnet.json': { model: 'resnet', device: 'k80', batches: [{ batch: 1, latencyMs: 10, stdMs: 1, memoryMB: 500 }] },
      'ssd.json': { ...profile([[1, 40], [2, 30]]), model: 'ssd' },
      'notes.txt': 'not a profile',
    });
    const profiles = loadProfiles(path);
    expect(profiles.map((p) => [p.model, p.version])).toEqual([
      ['resnet', 1],
      ['ssd', 1],
    ]);
    // Warned of only where a model in use has the profile.
    expect(warningsFor(profiles, ['resnet', 'ssd'])).toEqual(['ssd on k80: latency decreases from 40 ms at batch 1 to 30 ms at batch 2']);
    expect(warningsFor(profiles, ['resnet'])).toEqual([]);
    expect(warningsFor(profiles, ['ssd'], 'v100')).toEqual([]);
    expect(profileLookup(profiles)('resnet').latency(1)).toBe(11);
  });

  it('EXPECTED FAILURE: a bad file names the file and the field', () => {
    const path = folder({ 'bad.json': { model: 'm', device: 'd', batches: [{ batch: 0, latencyMs: 10, stdMs: 0, memoryMB: 1 }] } });
    const file = join(path, 'bad.json');
    expect(() => loadProfileFile(file)).toThrow(expect.objectContaining({ code: 'PANOPTES_CONFIG_INVALID' }));
    expect(() => loadProfileFile(file)).toThrow(`${file}:`);
    expect(() => loadProfileFile(file)).toThrow('batches[0].batch: got 0; expected > 0');
  });

  it('EXPECTED FAILURE: unknown keys, a batch size measured twice, a second profile for one (device, model)', () => {
    const one = { model: 'm', device: 'd', batches: [{ batch: 1, latencyMs: 10, stdMs: 0, memoryMB: 1 }] };
    expect(() => loadProfileFile(join(folder({ 'x.json': { ...one, gpu: 'v100' } }), 'x.json'))).toThrow('unknown key "gpu"');
    expect(() => loadProfileFile(join(folder({ 'x.json': { ...one, batches: [...one.batches, ...one.batches] } }), 'x.json'))).toThrow(
      'each batch size measured once',
    );
    const twice = folder({ 'a.json': one, 'b.json': one });
    expect(() => loadProfiles(twice)).toThrow(`a second profile for model "m" on device "d"; the first is ${join(twice, 'a.json')}`);
  });

  it('EXPECTED FAILURE: a missing profile names the model and the device; a missing directory names the directory', () => {
    const lookup = profileLookup([profile([[1, 10]])], 'k80');
    expect(() => lookup('yolo')).toThrow(
      expect.objectContaining({ code: 'PANOPTES_PROFILE_NOT_FOUND', details: { model: 'yolo', device: 'k80' } }),
    );
    expect(() => lookup('yolo')).toThrow('no batch profile for model "yolo" on device "k80"');
    expect(() => profileLookup([profile([[1, 10]])], 'v100')('resnet')).toThrow('on device "v100"');
    expect(() => loadProfiles('/nonexistent/profiles')).toThrow(
      expect.objectContaining({ code: 'PANOPTES_PROFILE_NOT_FOUND', details: { dir: '/nonexistent/profiles' } }),
    );
  });

  it('EXPECTED FAILURE: profiles of several devices need the device named', () => {
    const two = [profile([[1, 10]]), { ...profile([[1, 5]]), device: 'v100' }];
    expect(() => profileLookup(two)).toThrow(expect.objectContaining({ code: 'PANOPTES_SCHEDULER_INPUT' }));
    expect(profileLookup(two, 'v100')('resnet').latency(1)).toBe(5);
  });
});
