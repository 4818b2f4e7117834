// A TCP proxy between a service and a server (Redis), to stall or partition the link:
// - stall: nothing is forwarded in either direction and no socket is closed (a frozen peer,
//   a black-holed route); what was sent meanwhile is forwarded when the stall ends;
// - partition: every connection is closed and new ones are refused (the port stops listening);
// - heal: back to forwarding.
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  readonly port: number;
  readonly url: string;
  stall(): void;
  partition(): Promise<void>;
  heal(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let stalled = false;

  const onConnection = (client: Socket): void => {
    const server = connect(targetPort, targetHost);
    const pair: [Socket, Socket] = [client, server];
    pairs.add(pair);
    const end = (): void => {
      pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    client.on('error', end).on('close', end);
    server.on('error', end).on('close', end);
    client.pipe(server);
    server.pipe(client);
    if (stalled) hold(pair);
  };
  const hold = ([a, b]: [Socket, Socket]): void => {
    a.unpipe(b);
    b.unpipe(a);
    a.pause();
    b.pause();
  };
  const release = ([a, b]: [Socket, Socket]): void => {
    a.pipe(b);
    b.pipe(a);
  };

  let listener: Server = createServer(onConnection);
  const listen = (port: number): Promise<number> =>
    new Promise((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(port, '127.0.0.1', () => resolve((listener.address() as AddressInfo).port));
    });
  const port = await listen(0);
  /** Stops listening and drops every connection (close() waits for them to end). */
  const closeAll = async (): Promise<void> => {
    const closed = listener.listening ? new Promise<void>((resolve) => listener.close(() => resolve())) : Promise.resolve();
    for (const [a, b] of pairs) {
      a.destroy();
      b.destroy();
    }
    pairs.clear();
    await closed;
  };

  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stall() {
      stalled = true;
      for (const pair of pairs) hold(pair);
    },
    async partition() {
      stalled = false;
      await closeAll();
    },
    async heal() {
      if (stalled) {
        stalled = false;
        for (const pair of pairs) release(pair);
      }
      if (!listener.listening) {
        listener = createServer(onConnection);
        await listen(port);
      }
    },
    close: closeAll,
  };
}
