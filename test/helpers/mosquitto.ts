// A real Mosquitto 2.0 broker per test, for the bridge's external-broker mode.
// Never on 1883 (the machine's own broker may run there): each instance gets a free port, its
// own tmp dir (config, persistence db, password and ACL files) and its stderr log in memory.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../bench/free-port.js';

/**
 * The plant's-broker ACL of docs/plant-broker.md: devices (username = device id), SCADA's user
 * `scada` and the bridge's user `bridge`, last, so a test may append lines to its block.
 */
export const PLANT_ACL: readonly string[] = [
  'pattern write devices/%u/infer/+',
  'pattern write devices/%u/image/#',
  'pattern read devices/%u/result',
  'pattern read devices/%u/stream',
  'pattern read devices/%u/rpc/#',
  'user scada',
  'topic read devices/+/infer/+',
  'topic read devices/+/result',
  'topic read devices/+/stream',
  'topic read bridge/#',
  'user bridge',
  'topic read devices/+/infer/+',
  'topic read devices/+/image/#',
  'topic write devices/+/result',
  'topic write devices/+/stream',
  'topic write devices/+/rpc/#',
  'topic readwrite bridge/#',
];

export interface MosquittoOptions {
  /** username → password, written with mosquitto_passwd into a password_file. */
  users?: Record<string, string>;
  /** Lines of an acl_file (mosquitto's format). */
  acl?: string[];
  /** Defaults to true without users, false with them. */
  allowAnonymous?: boolean;
  /** max_inflight_messages: the send window of clients that set no Receive Maximum (default 20). */
  maxInflight?: number;
  /** max_queued_messages per client beyond the window (default 1000); more are dropped silently. */
  maxQueued?: number;
  /** Adds a websockets listener when this mosquitto build has them (wsPort stays undefined if not). */
  websockets?: boolean;
  /** log_type all (every packet) instead of the connection/subscription lines. */
  verbose?: boolean;
  extraConfig?: string[];
}

export interface Mosquitto {
  port: number;
  wsPort?: number;
  url: string;
  dir: string;
  logs(): string;
  /** Signals the broker and waits for its exit. SIGTERM saves the persistence db; SIGKILL does not. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Same port, same config and persistence dir: persistent sessions and their queued messages survive. */
  restart(): Promise<void>;
  /** stop + remove the tmp dir; idempotent. */
  close(): Promise<void>;
}

const MAX_LOG = 4 * 1024 * 1024;
// A failing test may never reach close(), and vitest may kill its worker without an 'exit'
// event: setpriv (util-linux) makes the kernel SIGKILL the broker when this process dies.
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));
// Debian installs the broker in /usr/sbin, which a CI shell's PATH may lack.
const MOSQUITTO = ['/usr/sbin/mosquitto', '/usr/local/sbin/mosquitto'].find((path) => existsSync(path)) ?? 'mosquitto';
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

const canConnect = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function configLines(dir: string, port: number, wsPort: number | undefined, opts: MosquittoOptions): string[] {
  const lines = [
    // Run as root, mosquitto drops to user "mosquitto", which cannot write the 0700 tmp dir.
    ...(process.getuid?.() === 0 ? [`user ${userInfo().username}`] : []),
    `listener ${port} 127.0.0.1`,
    ...(wsPort === undefined ? [] : [`listener ${wsPort} 127.0.0.1`, 'protocol websockets']),
    'persistence true',
    `persistence_location ${dir}/`,
    `allow_anonymous ${opts.allowAnonymous ?? opts.users === undefined}`,
    'log_dest stderr',
    ...(opts.verbose ? ['log_type all'] : ['log_type error', 'log_type warning', 'log_type notice', 'log_type information', 'log_type subscribe']),
  ];
  if (opts.maxInflight !== undefined) lines.push(`max_inflight_messages ${opts.maxInflight}`);
  if (opts.maxQueued !== undefined) lines.push(`max_queued_messages ${opts.maxQueued}`);
  if (opts.users !== undefined) {
    const file = join(dir, 'passwd');
    Object.entries(opts.users).forEach(([user, password], i) =>
      execFileSync('mosquitto_passwd', ['-b', ...(i === 0 ? ['-c'] : []), file, user, password], { stdio: 'pipe' }),
    );
    lines.push(`password_file ${file}`);
  }
  if (opts.acl !== undefined) {
    writeFileSync(join(dir, 'acl'), `${opts.acl.join('\n')}\n`);
    lines.push(`acl_file ${join(dir, 'acl')}`);
  }
  return [...lines, ...(opts.extraConfig ?? [])];
}

let websocketsMissing = false; // remembered once a build without them has refused the listener

export async function startMosquitto(opts: MosquittoOptions = {}): Promise<Mosquitto> {
  const dir = mkdtempSync(join(tmpdir(), 'mosquitto-'));
  const conf = join(dir, 'mosquitto.conf');
  let log = '';
  let child: ChildProcess | undefined;
  let closed = false;

  // Spawns with the config on disk; resolves once the listener(s) accept, rejects if it exits first.
  const launch = async (ports: number[]): Promise<void> => {
    const argv = [...(SETPRIV === undefined ? [] : [SETPRIV, '--pdeathsig', 'KILL']), MOSQUITTO, '-c', conf];
    const proc = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
    live.add(proc);
    proc.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      if (log.length > MAX_LOG) log = log.slice(-MAX_LOG / 2);
    });
    let exited = false;
    proc.once('exit', () => {
      exited = true;
      live.delete(proc);
    });
    child = proc;
    const from = log.length;
    const deadline = Date.now() + 5000;
    // "running" is logged once every listener is bound: a port taken by another process since
    // freePort() would otherwise answer the connect probe.
    for (const port of ports) {
      while (!log.includes(' running', from) || !(await canConnect(port))) {
        if (exited) throw new Error(`mosquitto exited before listening on ${port}:\n${log}`);
        if (Date.now() > deadline) throw new Error(`mosquitto not listening on ${port} within 5 s:\n${log}`);
        await sleep(20);
      }
    }
  };

  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    const exit = once(proc, 'exit');
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exit;
    clearTimeout(timer);
  };

  // A free port can be taken between probe and bind: retry with new ports on a failed start.
  let port = 0;
  let wsPort: number | undefined;
  for (let attempt = 1; ; attempt += 1) {
    port = await freePort();
    wsPort = opts.websockets && !websocketsMissing ? await freePort() : undefined;
    writeFileSync(conf, `${configLines(dir, port, wsPort, opts).join('\n')}\n`);
    try {
      await launch(wsPort === undefined ? [port] : [port, wsPort]);
      break;
    } catch (error) {
      await stop('SIGKILL');
      if (wsPort !== undefined && /websockets support not available/i.test(log)) websocketsMissing = true;
      else if (attempt >= 5) {
        rmSync(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }

  return {
    port,
    wsPort,
    url: `mqtt://127.0.0.1:${port}`,
    dir,
    logs: () => log,
    stop,
    restart: async () => {
      await stop('SIGTERM');
      await launch(wsPort === undefined ? [port] : [port, wsPort]);
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await stop('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
