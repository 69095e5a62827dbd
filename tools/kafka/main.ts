// A Kafka broker for development and CI that outlives this command (see ../server-command.ts):
//   npm run kafka -- start    starts one (or finds the running one); prints 127.0.0.1:<port> last
//                             (port 9092, Kafka's usual, when it is free: configs/kafka.yaml's)
//   npm run kafka -- status   prints its address, or "not running" and exits 1
//   npm run kafka -- stop     stops it
import { runServerCommand } from '../server-command.js';
import { startKafkaBroker } from './broker.js';

await runServerCommand(
  {
    kind: 'kafka',
    usualPorts: [9092, 9093],
    async start(dataDir, usual) {
      const ports = usual ? { port: 9092, controllerPort: 9093 } : {};
      const broker = await startKafkaBroker({ dataDir, detached: true, ...ports, log: (line) => console.error(line) });
      return { address: broker.brokers, port: broker.port, pid: broker.pid };
    },
  },
  process.argv[2],
);
