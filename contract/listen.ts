// Binding a listening port, for the broker's listeners and the admin HTTP server alike: a
// port that cannot be bound stops the start with the ListenError (exit 2) that names the
// variable to change.
import { once } from 'node:events';
import type { AddressInfo, Server } from 'node:net';
import { ListenError } from './errors.js';

/** Binds a server; a busy port becomes a ListenError naming the variable to change. */
export async function listen(server: Server, host: string, port: number, variable: string, what: string): Promise<number> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ListenError(variable, `${what} port ${port} is in use — set ${variable}`);
    if (code === 'EADDRNOTAVAIL') throw new ListenError(variable, `${what} address ${host} is not on this machine`);
    if (code === 'EACCES') throw new ListenError(variable, `${what} port ${port} needs privileges — set ${variable}`);
    throw err;
  }
  return (server.address() as AddressInfo).port;
}
