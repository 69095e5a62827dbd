import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_BATCH, defaultModelThreads, fastestBatch, modelBatches, modelThreads } from '../../cli/index.js';
import type { CompiledConfig } from '../../core/index.js';
import { compileProfile, linearProfile, peakThroughput } from '../../scheduler/index.js';

describe('the batch a model runs at before a plan', () => {
  it('on a GPU-like profile (throughput grows with the batch) is the largest batch that fits, as SCHEDULESATURATE takes', () => {
    // ℓ(b) = 5b + 20 ms: 2ℓ(b) ≤ 200 up to b = 16.
    const profile = compileProfile(linearProfile({ model: 'm', alphaMs: 5, betaMs: 20, maxBatch: 32 }));
    expect(fastestBatch(profile, 200)).toBe(16);
    expect(fastestBatch(profile, 200)).toBe(peakThroughput(profile, 200, Infinity)?.batch);
  });

  it('on a CPU-like profile (an image costs more in a larger batch) is the fastest batch, not the largest', () => {
    const measured = [
      { batch: 1, latencyMs: 60, stdMs: 0, memoryMB: 200 },
      { batch: 2, latencyMs: 110, stdMs: 0, memoryMB: 300 },
      { batch: 4, latencyMs: 260, stdMs: 0, memoryMB: 500 },
    ];
    const profile = compileProfile({ version: 1, model: 'm', device: 'd', batches: measured });
    expect(fastestBatch(profile, 2000)).toBe(2); // 18.2 images/s against 16.7 at 1 and 15.4 at 4
    expect(fastestBatch(profile, 200)).toBe(1); // batch 2 does not fit: 2 · 110 > 200
    expect(fastestBatch(profile, 100)).toBeUndefined();
  });

  it("with each run's CPU time in the profile, the batch that costs the least CPU per image, though another runs faster alone", () => {
    // CenterNet's shape on 2 cores: batch 3 a little faster alone, batch 1 the least CPU per image.
    const measured = [
      { batch: 1, latencyMs: 36, stdMs: 0, memoryMB: 200, cpuMs: 57 },
      { batch: 2, latencyMs: 70, stdMs: 0, memoryMB: 300, cpuMs: 125 },
      { batch: 3, latencyMs: 100, stdMs: 0, memoryMB: 400, cpuMs: 190 },
    ];
    const profile = compileProfile({ version: 1, model: 'm', device: 'cpu-x-2c', batches: measured });
    expect(fastestBatch(profile, 2000)).toBe(1);
    // A larger batch a little cheaper (3%, within what two profiles differ by) is not taken; 20% cheaper is.
    const cheaper = (cpuMs: number) => compileProfile({ version: 1, model: 'm', device: 'cpu-x-2c', batches: [measured[0]!, measured[1]!, { ...measured[2]!, cpuMs }] });
    expect(fastestBatch(cheaper(0.97 * 3 * 57), 2000)).toBe(1);
    expect(fastestBatch(cheaper(0.8 * 3 * 57), 2000)).toBe(3);
    // Without the CPU times, the fastest alone.
    expect(fastestBatch(compileProfile({ version: 1, model: 'm', device: 'cpu-x-2c', batches: measured.map(({ cpuMs: _, ...m }) => m) }), 2000)).toBe(3);
  });

  describe('for a deployment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'panoptes-batches-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(
      join(dir, 'test-device.m.json'),
      JSON.stringify({ model: 'm', device: 'test-device', batches: [{ batch: 1, latencyMs: 50, stdMs: 0, memoryMB: 1 }, { batch: 2, latencyMs: 120, stdMs: 0, memoryMB: 1 }] }),
    );
    const config = (backend: { batch?: number }): CompiledConfig =>
      ({
        file: join(dir, 'deployment.yaml'),
        deployment: { backend: { ...backend }, scheduler: { profiles: '.' } },
        apps: { a: { sloMs: 1000, nodes: [{ id: 'n', model: 'm' }] } },
      }) as unknown as CompiledConfig;

    it('runs two model threads on two cores or more, one on one core, or what backend.threads says', () => {
      expect([1, 2, 16].map((cores) => defaultModelThreads(cores))).toEqual([1, 2, 2]);
      expect(modelThreads(config({}))).toBe(defaultModelThreads());
      expect(modelThreads({ ...config({}), deployment: { backend: { threads: 3 } } } as unknown as CompiledConfig)).toBe(3);
      // A learned cache: the default, unless its lookups run asynchronously, on a core of their own.
      const cached = (cache: object) => ({ ...config({}), apps: { a: { sloMs: 1000, nodes: [{ id: 'n', model: 'm', cache }] } } }) as unknown as CompiledConfig;
      expect(modelThreads(cached({}))).toBe(defaultModelThreads());
      expect(modelThreads(cached({ lookups: 'async' }))).toBe(1);
    });

    it('takes backend.batch when the deployment sets it', () => {
      expect(modelBatches(config({ batch: 8 }), 'test-device')('m')).toEqual({ batch: 8, from: 'backend.batch' });
    });

    it("takes the fastest batch of this device's profile, and the default for a model without one", () => {
      expect(modelBatches(config({}), 'test-device')('m')).toEqual({ batch: 1, from: 'the test-device profile' });
      expect(modelBatches(config({}), 'test-device')('other')).toEqual({ batch: DEFAULT_BATCH, from: 'the default (no profile of other on test-device)' });
      expect(modelBatches(config({}), 'another-device')('m').batch).toBe(DEFAULT_BATCH);
    });
  });
});
