// `npm run bench -- bus`: 50 KB frame-sized messages through the memory bus and through Kafka,
// one after the other in the same run, into one consumer group.
// - Throughput: each source sends its next frame as soon as the bus accepted the last one;
//   messages over the time from the first send to the last message handled.
// - Latency: from the send call to the handler seeing the message, from cameras at 25 fps each
//   so that it measures the bus, not a queue the throughput run filled: 200 messages/s (eight
//   cameras) and 1,000 messages/s (forty; the goal: p99 ≤ 20 ms on Kafka).
// The last line's `maxFps` is the throughput run's messages/s, `p99Ms` the p99 at 1,000/s.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createKafkaBus, createMemoryBus, createLogger, type Bus } from '../core/index.js';
import { startKafkaBroker, type KafkaBroker } from '../tools/kafka/index.js';

const MESSAGE_BYTES = 50 * 1024;
/** Sources sending as fast as the bus takes them, each awaiting its last send (a camera's frames stay in order). */
const SOURCES = 32;
/** A paced source is a camera: this many frames a second. */
const CAMERA_FPS = 25;
const PARTITIONS = 8;
const SENT_AT = 'bench-sent-at';
/** Paced rates the latency is measured at, messages/s over all sources. */
const PACED_RATES = [200, 1000];
const LATENCY_SECONDS = 8;

export interface BusFigures {
  /** Messages/s when every source sends as fast as the bus takes them. */
  maxFps: number;
  /** p50 and p99 at each paced rate, the last the goal's 1,000 messages/s. */
  paced: { msgsPerS: number; achievedMsgsPerS: number; p50Ms: number; p99Ms: number }[];
}

/** Sends `messages` from `sources` sources, each at `fps` or as fast as the bus takes them. */
async function run(bus: Bus, messages: number, sources: number, fps?: number): Promise<{ seconds: number; latencies: number[] }> {
  const topic = `panoptes.bench.${Date.now()}`;
  await bus.createTopics([{ name: topic, partitions: PARTITIONS }]);
  const latencies: number[] = [];
  let warmedUp = 0;
  let done!: () => void;
  const allHandled = new Promise<void>((resolve) => (done = resolve));
  const consumer = bus.consumer({ groupId: `${topic}.group`, topics: [topic] });
  await consumer.run(async (batch) => {
    const now = performance.now();
    for (const m of batch.messages) {
      if (m.headers[SENT_AT] === undefined) warmedUp += 1;
      else latencies.push(now - Number(m.headers[SENT_AT]));
    }
    if (latencies.length >= messages) done();
  });

  const payload = randomBytes(MESSAGE_BYTES); // incompressible, like JPEG
  const producer = bus.producer();
  // One message per source first, and the clock starts once all are consumed: a new topic's
  // leader election and the group's first assignment are not the bus's steady pace.
  await producer.send(topic, Array.from({ length: sources }, (_, source) => ({ key: `source-${source}`, value: payload })));
  while (warmedUp < sources) await sleepUntil(performance.now() + 20);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: sources }, async (_, source) => {
      for (let i = source, n = 0; i < messages; i += sources, n++) {
        if (fps) await sleepUntil(started + (n * 1000) / fps);
        await producer.send(topic, [{ key: `source-${source}`, value: payload, headers: { [SENT_AT]: String(performance.now()) } }]);
      }
    }),
  );
  await allHandled;
  const seconds = (performance.now() - started) / 1000;
  await producer.close();
  await consumer.close();
  return { seconds, latencies: latencies.sort((a, b) => a - b) };
}

async function measure(bus: Bus, messages: number): Promise<BusFigures> {
  const throughput = await run(bus, messages, SOURCES);
  const paced: BusFigures['paced'] = [];
  for (const rate of PACED_RATES) {
    const { latencies, seconds } = await run(bus, LATENCY_SECONDS * rate, rate / CAMERA_FPS, CAMERA_FPS);
    const percentile = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
    paced.push({ msgsPerS: rate, achievedMsgsPerS: round(latencies.length / seconds), p50Ms: round(percentile(0.5), 2), p99Ms: round(percentile(0.99), 2) });
  }
  return { maxFps: round(messages / throughput.seconds), paced };
}

const describe = (figures: BusFigures): string =>
  `${figures.maxFps} msgs/s at most; ${figures.paced.map((p) => `at ${p.msgsPerS} msgs/s (${p.achievedMsgsPerS} kept up) p50 ${p.p50Ms} ms, p99 ${p.p99Ms} ms`).join('; ')}`;

export async function busBench(): Promise<void> {
  const logger = createLogger({ level: 'warn' });
  const messages = Number(process.env.BENCH_MESSAGES ?? 4000);
  let broker: KafkaBroker | undefined;
  const brokers = process.env.PANOPTES_KAFKA_BROKERS ?? (broker = await startKafkaBroker()).brokers;
  try {
    const memoryBus = createMemoryBus();
    const memory = await measure(memoryBus, messages);
    await memoryBus.close();
    console.log(`memory bus, ${messages} messages of ${MESSAGE_BYTES / 1024} KB: ${describe(memory)}`);

    // Frames are JPEG, which the deployment never compresses again; nor does this.
    const kafkaBus = await createKafkaBus({ brokers: [brokers], logger, compression: 'none' });
    await run(kafkaBus, Math.min(400, messages), SOURCES); // warm-up: connections, group coordinator
    const kafka = await measure(kafkaBus, messages);
    await kafkaBus.close();
    console.log(`Kafka (${brokers}, one local broker, acks=all, idempotent): ${describe(kafka)}`);
    console.log(JSON.stringify({ maxFps: kafka.maxFps, p99Ms: kafka.paced.at(-1)!.p99Ms, kafka, memory, messages, messageBytes: MESSAGE_BYTES }));
  } finally {
    await broker?.stop();
  }
}

const round = (n: number, digits = 1): number => Number(n.toFixed(digits));

function sleepUntil(at: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, at - performance.now())));
}
