/**
 * The pieces that make a Kafka loss visible, without a broker: the loss ledger (what was
 * produced and not consumed when a broker lost it), the drops it becomes, and the log throttle
 * that keeps a broker's trouble to a line and a count.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createLogThrottle,
  dropContract,
  frameContract,
  lossDrops,
  lossNote,
  resultRowContract,
  Topics,
  type BusLoss,
  type LossNote,
  type ProducerRecord,
} from '../../core/index.js';
import { startLossReporter } from '../../core/bus/kafka/loss-reporter.js';
import { createLossLedger, type LossLedger, type LossProbe } from '../../core/bus/kafka/loss-watch.js';
import type { TopicAdmin } from '../../core/bus/kafka/topics.js';
import { silentLogger } from '../../core/index.js';
import { waitFor } from '../conformance/wait-for.js';

/** A broker as the ledger sees it, changed by each test. */
function fakeBroker() {
  const state = {
    clusterId: 'A',
    reachable: true,
    topics: new Map<string, Map<number, number>>(),
    committed: new Map<string, Map<number, number>>(),
  };
  const answer = <T>(value: () => T): Promise<T> => (state.reachable ? Promise.resolve(value()) : Promise.reject(new Error('ECONNREFUSED')));
  const probe: LossProbe = {
    clusterId: () => answer(() => state.clusterId),
    topics: () => answer(() => new Set(state.topics.keys())),
    highWatermarks: (topic) => answer(() => state.topics.get(topic) ?? new Map()),
    committed: (group, topic) => answer(() => state.committed.get(`${group}/${topic}`) ?? new Map()),
  };
  return { state, probe };
}

const frame = (seq: number): ProducerRecord => ({
  key: 'cam',
  value: frameContract.encode({ source: 'cam', seq, captureTimeMs: 1, ptsMs: 0, width: 2, height: 2, jpeg: new Uint8Array([1, 2, 3]) }),
});
const row = (seq: number, table = 'frames'): ProducerRecord => ({
  key: 'cam',
  value: resultRowContract.encode({ app: 'a', table, rowId: `${table}:${seq}`, source: 'cam', fields: { frame_seq: seq } }),
});

function ledgerWith(broker: ReturnType<typeof fakeBroker>) {
  return createLossLedger<LossNote>({ note: lossNote, consumerOf: (topic) => (topic === Topics.frames ? 'backend' : 'sink'), onLost: async () => {} }, broker.probe);
}

/** Produces frames 0..n-1 on partition 0 of the frames topic at offsets 0..n-1. */
function produceFrames(ledger: ReturnType<typeof ledgerWith>, broker: ReturnType<typeof fakeBroker>, n: number): void {
  const records = Array.from({ length: n }, (_, i) => frame(i));
  ledger.produced(Topics.frames, records, records.map((_, i) => ({ topic: Topics.frames, partition: 0, offset: i })));
  broker.state.topics.set(Topics.frames, new Map([[0, n]]));
}

describe('loss ledger', () => {
  it('forgets what the consuming group committed, and reports nothing while the broker keeps its records', async () => {
    const broker = fakeBroker();
    const ledger = ledgerWith(broker);
    produceFrames(ledger, broker, 10);
    broker.state.committed.set(`backend/${Topics.frames}`, new Map([[0, 6]]));
    expect(await ledger.check([Topics.frames])).toBeUndefined();
    expect(ledger.held()).toEqual({ [Topics.frames]: 4 });
  });

  it('reports the unconsumed records when the broker is a new cluster (replaced by an empty one)', async () => {
    const broker = fakeBroker();
    const ledger = ledgerWith(broker);
    produceFrames(ledger, broker, 10);
    broker.state.committed.set(`backend/${Topics.frames}`, new Map([[0, 6]]));
    await ledger.check();
    Object.assign(broker.state, { clusterId: 'B', topics: new Map(), committed: new Map() });
    const loss = await ledger.check([Topics.frames, Topics.results]);
    expect(loss?.reason).toBe('broker-replaced');
    expect(loss?.detail).toContain('A → B');
    // Every topic is new, the ones nothing of ours was on too: their consumers start them over.
    expect(loss?.topics).toEqual([Topics.frames, Topics.results]);
    expect(loss?.records.map((r) => r.note.frameSeq)).toEqual([6, 7, 8, 9]);
    expect(ledger.held()).toEqual({});
  });

  it('reports a deleted topic, and a log whose end went below an offset it acknowledged', async () => {
    const broker = fakeBroker();
    const ledger = ledgerWith(broker);
    produceFrames(ledger, broker, 3);
    broker.state.topics.delete(Topics.frames);
    expect((await ledger.check([Topics.frames]))?.reason).toBe('topic-deleted');

    produceFrames(ledger, broker, 3);
    broker.state.topics.set(Topics.frames, new Map([[0, 1]])); // re-created elsewhere, one record since
    const loss = await ledger.check([Topics.frames]);
    expect(loss?.reason).toBe('log-truncated');
    expect(loss?.records).toHaveLength(3);
  });

  it('a record acknowledged while the end offsets are being read is not taken for lost', async () => {
    const broker = fakeBroker();
    const ledger = ledgerWith(broker);
    produceFrames(ledger, broker, 3);
    const answer = broker.probe.highWatermarks;
    broker.probe.highWatermarks = async (topic) => {
      const highs = await answer(topic); // the broker answers 3 ...
      const record = frame(3); // ... and acknowledges offset 3 before the answer arrives
      ledger.produced(Topics.frames, [record], [{ topic: Topics.frames, partition: 0, offset: 3 }]);
      return highs;
    };
    expect(await ledger.check([Topics.frames])).toBeUndefined();
    broker.probe.highWatermarks = answer;
    broker.state.topics.set(Topics.frames, new Map([[0, 4]]));
    expect(await ledger.check([Topics.frames])).toBeUndefined();
  });

  it('a topic this process made that vanished is a loss even with nothing of ours on it', async () => {
    const broker = fakeBroker();
    const ledger = ledgerWith(broker);
    broker.state.topics.set(Topics.results, new Map());
    expect(await ledger.check([Topics.results])).toBeUndefined();
    broker.state.topics.clear();
    const loss = await ledger.check([Topics.results]);
    expect(loss).toMatchObject({ reason: 'topic-deleted', topics: [Topics.results], records: [] });
  });

  it('concludes nothing while the broker does not answer (a restart loses nothing)', async () => {
    const broker = fakeBroker();
    const ledger = ledgerWith(broker);
    produceFrames(ledger, broker, 5);
    broker.state.reachable = false;
    expect(await ledger.check([Topics.frames])).toBeUndefined();
    broker.state.reachable = true;
    expect(await ledger.check([Topics.frames])).toBeUndefined();
    expect(ledger.held()).toEqual({ [Topics.frames]: 5 });
  });

  it('keeps at most maxNotes per topic and counts the rest', async () => {
    const broker = fakeBroker();
    const ledger = createLossLedger<LossNote>({ note: lossNote, consumerOf: () => 'backend', onLost: async () => {}, maxNotes: 4 }, broker.probe);
    produceFrames(ledger, broker, 10);
    broker.state.clusterId = 'A';
    await ledger.check();
    broker.state.clusterId = 'B';
    const loss = await ledger.check();
    expect(loss?.records).toHaveLength(4);
    expect(loss?.unrecorded).toBe(6);
  });
});

describe('loss reporter', () => {
  it('keeps a loss whose topics or drops cannot be had yet, and reports it once they can', async () => {
    const loss: BusLoss<LossNote> = { reason: 'broker-replaced', detail: 'cluster A → B', topics: [Topics.results], records: [], unrecorded: 0 };
    let found: BusLoss<LossNote> | undefined = loss;
    const check = async (): Promise<BusLoss<LossNote> | undefined> => {
      const next = found; // found once, as the ledger does: its notes leave it with the loss
      found = undefined;
      return next;
    };
    const ledger: LossLedger<LossNote> = { check, produced: () => {}, held: () => ({}) };
    let recreateFailures = 2;
    const topics = { recreate: async () => (recreateFailures-- > 0 ? Promise.reject(new Error('UNKNOWN_TOPIC_OR_PARTITION')) : [Topics.results]), known: () => [Topics.results] } as unknown as TopicAdmin;
    const reported: BusLoss<LossNote>[] = [];
    let reportFailures = 1;
    const onLost = async (l: BusLoss<LossNote>): Promise<void> => {
      if (reportFailures-- > 0) throw new Error('the drops topic has no leader yet');
      reported.push(l);
    };
    const rewound: string[][] = [];
    const rewind = async (lost: readonly string[]): Promise<void> => {
      expect(recreateFailures, 'consumers rewound only once the topics exist again').toBeLessThan(0);
      rewound.push([...lost]);
    };
    const reporter = startLossReporter({ ledger, topics, producers: () => [], rewind, logger: silentLogger(), watch: { note: lossNote, consumerOf: () => undefined, onLost, intervalMs: 5 } });
    await waitFor(() => reported.length > 0, 'the loss to be reported');
    await reporter.stop(1_000);
    expect(reported).toEqual([loss]);
    // Once, though the report was tried twice: the topic made anew, read from its start.
    expect(rewound).toEqual([[Topics.results]]);
  });

  it('checks once more when stopped, so a process that ends right after a loss still reports it', async () => {
    const loss: BusLoss<LossNote> = { reason: 'broker-replaced', detail: 'cluster A → B', topics: [Topics.frames], records: [], unrecorded: 0 };
    let checks = 0;
    // The first rounds see the old broker; the loss shows only in the round run by stop().
    let stopped = false;
    const ledger: LossLedger<LossNote> = { check: async () => (checks++, stopped ? loss : undefined), produced: () => {}, held: () => ({}) };
    const topics = { recreate: async () => [Topics.frames], known: () => [Topics.frames] } as unknown as TopicAdmin;
    const reported: BusLoss<LossNote>[] = [];
    const onLost = async (l: BusLoss<LossNote>): Promise<void> => void reported.push(l);
    const reporter = startLossReporter({ ledger, topics, producers: () => [], rewind: async () => {}, logger: silentLogger(), watch: { note: lossNote, consumerOf: () => undefined, onLost, intervalMs: 60_000 } });
    stopped = true;
    await reporter.stop(1_000);
    expect(checks).toBe(1);
    expect(reported).toEqual([loss]);
  });

  it('gives up the last check when told to', async () => {
    const ledger: LossLedger<LossNote> = { check: () => new Promise(() => {}), produced: () => {}, held: () => ({}) }; // the broker never answers
    const topics = { recreate: async () => [], known: () => [] } as unknown as TopicAdmin;
    const reporter = startLossReporter({ ledger, topics, producers: () => [], rewind: async () => {}, logger: silentLogger(), watch: { note: lossNote, consumerOf: () => undefined, onLost: async () => {}, intervalMs: 60_000 } });
    const started = Date.now();
    await reporter.stop(60_000, new Promise((resolve) => setTimeout(resolve, 50)));
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe('drops of a loss', () => {
  const loss = (records: BusLoss<LossNote>['records']): BusLoss<LossNote> => ({ reason: 'broker-replaced', detail: 'cluster A → B', topics: [Topics.results], records, unrecorded: 0 });
  const at = (topic: string, record: ProducerRecord, offset: number) => ({ topic, partition: 0, offset, note: lossNote(topic, record)! });

  it('one drop per frame whose rows were lost, naming the tables, the reason and what was seen', () => {
    const { drops, resent } = lossDrops(loss([at(Topics.results, row(4), 0), at(Topics.results, row(4, 'detections'), 1), at(Topics.frames, frame(5), 7)]), 'bus', 1000);
    expect(resent).toEqual([]);
    const decoded = drops.map((d) => dropContract.decode(d.value));
    expect(decoded).toEqual([
      expect.objectContaining({ what: 'row', why: 'broker-replaced', source: 'cam', frameSeq: 4, detail: expect.stringMatching(/^2 result rows \(detections, frames\) on panoptes.results may be lost: cluster A → B/) }),
      expect.objectContaining({ what: 'frame', why: 'broker-replaced', source: 'cam', frameSeq: 5 }),
    ]);
  });

  it('a lost drop is published again as it was', () => {
    const dropRecord: ProducerRecord = { key: 'cam', value: dropContract.encode({ what: 'frame', where: 'backend:x', why: 'deadline', source: 'cam', frameSeq: 1, atMs: 5 }) };
    const { drops, resent } = lossDrops(loss([at(Topics.drops, dropRecord, 0)]), 'bus');
    expect(drops).toEqual([]);
    expect(resent).toEqual([dropRecord]);
  });
});

describe('log throttle', () => {
  afterEach(() => vi.useRealTimers());

  it('logs the first of a kind, then one line with the count per interval, and starts over after a quiet interval', () => {
    vi.useFakeTimers();
    const lines: number[] = [];
    const throttle = createLogThrottle(10_000);
    for (let i = 0; i < 300; i++) throttle.log('unknown topic', (repeats) => lines.push(repeats));
    expect(lines).toEqual([0]);
    vi.advanceTimersByTime(10_000);
    expect(lines).toEqual([0, 299]);
    vi.advanceTimersByTime(10_000); // quiet
    throttle.log('unknown topic', (repeats) => lines.push(repeats));
    expect(lines).toEqual([0, 299, 0]);
    throttle.log('other', (repeats) => lines.push(repeats));
    throttle.log('other', (repeats) => lines.push(repeats));
    throttle.close();
    expect(lines).toEqual([0, 299, 0, 0, 1]);
  });
});
