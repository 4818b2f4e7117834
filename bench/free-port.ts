// A free TCP port on the loopback for a private server (Redis, Mosquitto), never 1883, where
// the machine's own broker may run. Another process may still take it before the server binds:
// callers retry on a failed bind.
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';

export async function freePort(): Promise<number> {
  for (;;) {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    server.close();
    await once(server, 'close');
    if (port !== 1883) return port;
  }
}
