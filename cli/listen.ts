import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Starts `server` on host:port (127.0.0.1 unless told otherwise; port 0 picks a free one) and says where it listens. */
export async function listen(server: Server, port: number, host = '127.0.0.1'): Promise<{ url: string; close: () => Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const { address, port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${address}:${bound}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
