// A private, throw-away Mosquitto for the benchmark's plant systems (bridges with BROKER_URL):
// a free port on 127.0.0.1 (never 1883, where the machine's own broker may run), a generated
// config in its own tmp dir, no persistence and no limit on queues, in-flight windows or
// connections, so the broker's limits never decide a step. Like redis-server.ts for Redis.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './free-port.js';

export interface PrivateMosquitto {
  readonly port: number;
  readonly url: string;
  /** For the benchmark's CPU figures. */
  readonly pid: number;
  /** Its stderr (errors only: `log_type error`). */
  logs(): string;
  /** Kills it and removes its tmp dir; idempotent. */
  stop(): Promise<void>;
}

export interface MosquittoServerOptions {
  /** Extra config lines, appended (later ones win where Mosquitto allows it). */
  extraConfig?: string[];
}

// If the bench dies without stop(), the kernel kills the broker with it (util-linux setpriv).
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));
const READY_MS = 5000;

function config(port: number, options: MosquittoServerOptions): string {
  return `${[
    // Started as root, mosquitto drops privileges to user "mosquitto": stay who we are.
    ...(process.getuid?.() === 0 ? [`user ${userInfo().username}`] : []),
    `listener ${port} 127.0.0.1`,
    'allow_anonymous true',
    'persistence false',
    'max_queued_messages 1000000',
    // 0: no limit on QoS 1 messages in flight to a v3 client (a v5 client's Receive Maximum still applies).
    'max_inflight_messages 0',
    'max_connections -1',
    'log_dest stderr',
    'log_type error',
    // As the embedded broker does on its sockets (setNoDelay): with Nagle, replies and PUBACKs
    // wait for the peer's delayed ACK, which would show in the latency as broker cost.
    'set_tcp_nodelay true',
    ...(options.extraConfig ?? []),
  ].join('\n')}\n`;
}

export async function startPrivateMosquitto(options: MosquittoServerOptions = {}): Promise<PrivateMosquitto> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-mosquitto-'));
    const port = await freePort();
    const conf = join(dir, 'mosquitto.conf');
    writeFileSync(conf, config(port, options));
    const argv = [...(SETPRIV === undefined ? [] : [SETPRIV, '--pdeathsig', 'KILL']), 'mosquitto', '-c', conf];
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      if (log.length > 1_000_000) log = log.slice(-500_000);
    });
    const exited = once(child, 'exit');
    try {
      await listening(child, port, () => log);
      let stopped = false;
      return {
        port,
        url: `mqtt://127.0.0.1:${port}`,
        pid: child.pid!,
        logs: () => log,
        async stop() {
          if (stopped) return;
          stopped = true;
          if (child.exitCode === null && child.signalCode === null) {
            child.kill('SIGTERM');
            const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
            await exited;
            clearTimeout(timer);
          }
          rmSync(dir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      lastError = err; // most likely the port was taken between freePort() and the bind
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }
  throw lastError;
}

const alive = (child: ChildProcess): boolean => child.exitCode === null && child.signalCode === null;

/**
 * Resolves once the port accepts connections and the broker is still running a moment later:
 * with `log_type error` Mosquitto says nothing when it is up, and a port taken by another
 * process since freePort() would answer the probe while Mosquitto exits on its failed bind.
 */
async function listening(child: ChildProcess, port: number, log: () => string): Promise<void> {
  const deadline = Date.now() + READY_MS;
  const spawnError = new Promise<never>((_, reject) => child.once('error', reject));
  spawnError.catch(() => undefined);
  for (;;) {
    if (!alive(child)) throw new Error(`mosquitto exited before listening on ${port}: ${log()}`);
    if (await Promise.race([canConnect(port), spawnError])) break;
    if (Date.now() > deadline) throw new Error(`mosquitto not listening on ${port} within ${READY_MS} ms: ${log()}`);
    await sleep(20);
  }
  await sleep(100);
  if (!alive(child)) throw new Error(`mosquitto exited after start on ${port}: ${log()}`);
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
