// A ClickHouse server for development and CI that outlives this command (see ../server-command.ts):
//   npm run clickhouse -- start    starts one (or finds the running one); prints its URL last
//                                  (HTTP 8123 and TCP 9000, ClickHouse's usual, when they are free)
//   npm run clickhouse -- status   prints its URL, or "not running" and exits 1
//   npm run clickhouse -- stop     stops it
import { runServerCommand } from '../server-command.js';
import { startClickHouseServer } from './server.js';

await runServerCommand(
  {
    kind: 'clickhouse',
    usualPorts: [8123, 9000],
    async start(dataDir, usual) {
      const ports = usual ? { httpPort: 8123, tcpPort: 9000 } : {};
      const server = await startClickHouseServer({ dataDir, detached: true, ...ports, log: (line) => console.error(line) });
      return { address: server.url, port: server.httpPort, pid: server.pid };
    },
  },
  process.argv[2],
);
