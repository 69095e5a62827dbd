/**
 * A replay faster than real time beside a live stream on one backend, every topic with one
 * partition. The replay's frames travel on a topic of their own, so the frames plan-ahead holds
 * back never hold up the live frames queued behind them: each live frame is analyzed on time
 * while the replay's backlog waits. On the live frames' own topic the same backlog would stand
 * in front of them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createBackend, createOnnxRuntime, taskTopics } from '../../analyzers/index.js';
import { createAppLogic } from '../../apps/index.js';
import { appSpecSchema, Channels, createMemoryBus, dropContract, loadModelZoo, parseConfig, projectRoot, resultRowContract, silentLogger, Topics } from '../../core/index.js';
import { waitFor } from '../conformance/wait-for.js';

const REPLAY = 60;
const SLO_MS = 1500;
const jpeg = readFileSync(join(projectRoot(), 'test/fixtures/images/room-person.jpg'));
const detect = createAppLogic(parseConfig(appSpecSchema, `name: detect\nsloMs: ${SLO_MS}\nnodes: [{ id: detect, model: centernet }]\nedges: [{ from: frames, to: detect }]\n`, 'detect.yaml'));

/** Sends a replay's frames on `replayTopic`, then a live frame every 400 ms; how long each live frame took to its row (ms; Infinity: dropped for its deadline). */
async function liveBesideReplay(replayTopic: string): Promise<number[]> {
  const bus = createMemoryBus();
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const backend = createBackend({
    id: 'b', bus, runtime, models: loadModelZoo(), apps: [detect], appsForSource: () => ['detect'],
    realtime: (source) => source === 'live', batch: 2, logger: silentLogger(),
  });
  const stored = new Map<string, number>();
  const replayed = (): number => [...stored.keys()].filter((k) => k.startsWith('replay/')).length;
  try {
    await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead, ...taskTopics([detect])].map((name) => ({ name, partitions: 1 })));
    await bus.consumer({ groupId: 'observer', topics: [Topics.results, Topics.drops] }).run(async (batch) => {
      for (const m of batch.messages) {
        if (batch.topic === Topics.drops) {
          const drop = dropContract.decode(m.value);
          stored.set(`${drop.source}/${String(drop.frameSeq)}`, Infinity);
          continue;
        }
        const row = resultRowContract.decode(m.value);
        if (row.table === 'frames') stored.set(`${row.source}/${String(row.fields.frame_seq)}`, Date.now());
      }
    });
    await backend.start();
    const producer = bus.producer();
    const frame = (source: string, seq: number) => ({ source, seq, captureTimeMs: Date.now(), ptsMs: seq * 100, width: 768, height: 432, jpeg, apps: ['detect'] });
    const replayChannel = replayTopic === Topics.frames ? Channels.frames : Channels.backfillFrames;
    await producer.send(replayTopic, Array.from({ length: REPLAY }, (_, seq) => replayChannel.record(frame('replay', seq))));
    const sentAt: number[] = [];
    for (let seq = 0; seq < 6; seq++) {
      sentAt.push(Date.now());
      await producer.send(Topics.frames, [Channels.frames.record(frame('live', seq))]);
      await new Promise((resolve) => setTimeout(resolve, 400));
    }
    await waitFor(() => sentAt.every((_, seq) => stored.has(`live/${seq}`)), 'every live frame stored or dropped', { timeoutMs: 60_000 });
    const waitedMs = sentAt.map((at, seq) => stored.get(`live/${seq}`)! - at);
    console.log(`replay on ${replayTopic}: live frames stored ${waitedMs.map((ms) => (ms === Infinity ? 'dropped' : `${ms} ms`)).join(', ')} after they were sent; ${replayed()} of ${REPLAY} replay frames by then`);
    await waitFor(() => replayed() === REPLAY, 'the replay finished', { timeoutMs: 60_000 });
    return waitedMs;
  } finally {
    await backend.close();
    await runtime.close();
    await bus.close();
  }
}

describe('co-location on one backend, one partition per topic', () => {
  it('live frames are analyzed on time while a replay backlog waits in the idle time: the replay travels apart', async () => {
    // None dropped, each stored within its SLO.
    for (const ms of await liveBesideReplay(Topics.backfillFrames)) expect(ms).toBeLessThan(SLO_MS);
  }, 120_000);

  it("on the live frames' own topic the same replay would stand in front of them (why it travels apart)", async () => {
    // Stored after their SLO, or dropped for it.
    expect(Math.max(...(await liveBesideReplay(Topics.frames)))).toBeGreaterThan(SLO_MS);
  }, 120_000);
});
