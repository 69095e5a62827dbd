// `npm run bench -- bus`: 50 KB frame-sized messages through the memory bus and through Kafka,
// one after the other in the same run, from eight sources into one consumer group.
// - Throughput: each source sends its next frame as soon as the bus accepted the last one;
//   messages over the time from the first send to the last message handled.
// - Latency: each source sends 25 frames a second (200 messages/s in all, eight live cameras),
//   so it measures the bus, not a queue the throughput run filled; from the send call to the
//   handler seeing the message.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createKafkaBus, createMemoryBus, createLogger, type Bus } from '../core/index.js';
import { startKafkaBroker, type KafkaBroker } from '../tools/kafka/index.js';

const MESSAGE_BYTES = 50 * 1024;
const SOURCES = 8;
const PARTITIONS = 8;
const SENT_AT = 'bench-sent-at';
const CAMERA_FPS = 25;
const LATENCY_SECONDS = 8;

export interface BusFigures {
  msgsPerS: number;
  p50Ms: number;
  p99Ms: number;
}

/** Sends `messages` from SOURCES sources, each at `fps` or as fast as the bus takes them. */
async function run(bus: Bus, messages: number, fps?: number): Promise<{ seconds: number; latencies: number[] }> {
  const topic = `panoptes.bench.${Date.now()}`;
  await bus.createTopics([{ name: topic, partitions: PARTITIONS }]);
  const latencies: number[] = [];
  let done!: () => void;
  const allHandled = new Promise<void>((resolve) => (done = resolve));
  const consumer = bus.consumer({ groupId: `${topic}.group`, topics: [topic] });
  await consumer.run(async (batch) => {
    const now = performance.now();
    for (const m of batch.messages) latencies.push(now - Number(m.headers[SENT_AT]));
    if (latencies.length >= messages) done();
  });

  const payload = randomBytes(MESSAGE_BYTES); // incompressible, like JPEG
  const producer = bus.producer();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: SOURCES }, async (_, source) => {
      for (let i = source, n = 0; i < messages; i += SOURCES, n++) {
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
  const throughput = await run(bus, messages);
  const { latencies } = await run(bus, Math.min(messages, LATENCY_SECONDS * SOURCES * CAMERA_FPS), CAMERA_FPS);
  const percentile = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  return { msgsPerS: round(messages / throughput.seconds), p50Ms: round(percentile(0.5), 2), p99Ms: round(percentile(0.99), 2) };
}

export async function busBench(): Promise<void> {
  const logger = createLogger({ level: 'warn' });
  const messages = Number(process.env.BENCH_MESSAGES ?? 4000);
  let broker: KafkaBroker | undefined;
  const brokers = process.env.PANOPTES_KAFKA_BROKERS ?? (broker = await startKafkaBroker()).brokers;
  try {
    const memoryBus = createMemoryBus();
    const memory = await measure(memoryBus, messages);
    await memoryBus.close();
    console.log(`memory bus: ${messages} messages of ${MESSAGE_BYTES / 1024} KB, ${memory.msgsPerS} msgs/s; at ${SOURCES * CAMERA_FPS} msgs/s p50 ${memory.p50Ms} ms, p99 ${memory.p99Ms} ms`);

    // Frames are JPEG, which the deployment never compresses again; nor does this.
    const kafkaBus = await createKafkaBus({ brokers: [brokers], logger, compression: 'none' });
    await run(kafkaBus, Math.min(400, messages)); // warm-up: connections, group coordinator
    const kafka = await measure(kafkaBus, messages);
    await kafkaBus.close();
    console.log(`Kafka (${brokers}, one local broker, acks=all, idempotent): ${kafka.msgsPerS} msgs/s; at ${SOURCES * CAMERA_FPS} msgs/s p50 ${kafka.p50Ms} ms, p99 ${kafka.p99Ms} ms`);
    console.log(JSON.stringify({ memory, kafka, messages, messageBytes: MESSAGE_BYTES, latencyAtMsgsPerS: SOURCES * CAMERA_FPS }));
  } finally {
    await broker?.stop();
  }
}

const round = (n: number, digits = 1): number => Number(n.toFixed(digits));

function sleepUntil(at: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, at - performance.now())));
}
