// Where idle devices connect from: the broker's address, and for a loopback broker a
// source address and port per connection spread over 127.0.0.0/8.
import { lookup } from 'node:dns/promises';
import { isIPv4 } from 'node:net';

export const DEFAULT_PER_SOURCE_ADDRESS = 10_000;

// 127.0.0.1 is left to everything else on the machine; idle devices start at 127.0.0.2.
const FIRST_SOURCE = (127 << 24) + 2;
const LAST_SOURCE = (127 << 24) + 0xfffffe;
// Below Linux's ephemeral range (32768–60999), so the ports chosen here do not compete with
// the ports the kernel hands out to other programs' outgoing connections.
const FIRST_SOURCE_PORT = 20_000;
const MAX_PER_ADDRESS = 65_535 - FIRST_SOURCE_PORT + 1;

export interface SourceEndpoint {
  localAddress: string;
  localPort: number;
}

/**
 * The loopback source (address and port) of the index-th connection (from 0). Linux's
 * ephemeral port range bounds the connections per (source, destination, port), so one source
 * address cannot carry tens of thousands of connections to one broker port; all of
 * 127.0.0.0/8 is loopback and needs no setup. The port is chosen here too: a bind() to port 0
 * makes the kernel search for a free port, which gets slow once thousands are bound, while a
 * given port binds at once.
 */
export function loopbackSource(index: number, perAddress: number = DEFAULT_PER_SOURCE_ADDRESS): SourceEndpoint {
  if (!(Number.isInteger(index) && index >= 0)) throw new RangeError(`index must be a non-negative integer, got ${index}`);
  if (!(Number.isInteger(perAddress) && perAddress >= 1 && perAddress <= MAX_PER_ADDRESS)) {
    throw new RangeError(`perAddress must be an integer from 1 to ${MAX_PER_ADDRESS}, got ${perAddress}`);
  }
  const n = FIRST_SOURCE + Math.floor(index / perAddress);
  if (n > LAST_SOURCE) throw new RangeError(`connection ${index} needs more source addresses than 127.0.0.0/8 has`);
  return {
    localAddress: [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff].join('.'),
    localPort: FIRST_SOURCE_PORT + (index % perAddress),
  };
}

/**
 * Where to connect and whether to spread source addresses: a loopback broker (127.x, or a
 * name such as localhost that resolves to one) gets them; anything else keeps the default
 * source, which is all a remote route has.
 */
export async function resolveTarget(host: string): Promise<{ address: string; spread: boolean }> {
  const address = isIPv4(host) ? host : (await lookup(host, { family: 4 }).catch(() => ({ address: host }))).address;
  return isIPv4(address) && address.startsWith('127.') ? { address, spread: true } : { address: host, spread: false };
}
