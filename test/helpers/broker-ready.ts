// Waits on the embedded broker's own events (Aedes), for tests that must know the broker has
// done something before they go on, instead of guessing how long it takes.
import type { Aedes, Client } from 'aedes';

/**
 * Resolves once the broker has finished `clientId`'s connect: CONNACK sent and everything its
 * session had queued written to the socket (Aedes' `clientReady`). Start it before the client connects.
 */
export function sessionReady(aedes: Aedes, clientId: string, timeoutMs = 5000): Promise<void> {
  return new Promise((resolve, reject) => {
    const ready = (client: Client): void => {
      if (client.id !== clientId) return;
      aedes.off('clientReady', ready);
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      aedes.off('clientReady', ready);
      reject(new Error(`${clientId}: connect not finished after ${timeoutMs} ms`));
    }, timeoutMs);
    aedes.on('clientReady', ready);
  });
}
