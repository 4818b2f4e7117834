// A Redis primary, one replica and three sentinels, each its own redis-server process on a
// free port with a generated configuration in a temp dir, for failover tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../bench/free-port.js';
import { tempDir } from './security.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

export const SENTINEL_NAME = 'mymaster';

export interface SentinelSet {
  primaryPort: number;
  replicaPort: number;
  /** The replication link runs through this proxy: stall or cut it to make the replica lag. */
  replication: TcpProxy;
  /** `host:port,…` for REDIS_SENTINELS. */
  sentinels: string;
  killPrimary(): void;
  /** The port the sentinels name as primary now. */
  currentPrimary(): Promise<number>;
  stop(): Promise<void>;
}

function start(args: string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`redis-server not ready: ${output}`)), 5000);
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections') || output.includes('+monitor master')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output}`)));
  });
}

export async function startSentinelSet(): Promise<SentinelSet> {
  const dir = tempDir('eab-sentinel-');
  const children: ChildProcess[] = [];
  try {
    return await startAll(dir, children);
  } catch (err) {
    // A part that did not start must not leave the others running.
    for (const child of children) child.kill('SIGKILL');
    dir.remove();
    throw err;
  }
}

async function startAll(dir: { path: string; remove(): void }, children: ChildProcess[]): Promise<SentinelSet> {
  const base = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir.path];
  const primaryPort = await freePort();
  children.push(await start(['--port', String(primaryPort), ...base]));
  const replication = await startTcpProxy(primaryPort);
  const replicaPort = await freePort();
  children.push(await start(['--port', String(replicaPort), ...base, '--replicaof', '127.0.0.1', String(replication.port)]));
  const replica = new Redis(replicaPort, '127.0.0.1', { lazyConnect: true });
  await replica.connect();
  for (let i = 0; i < 50 && !(await replica.info('replication')).includes('master_link_status:up'); i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  replica.disconnect();
  const sentinelPorts: number[] = [];
  for (let i = 0; i < 3; i += 1) {
    const port = await freePort();
    const file = join(dir.path, `sentinel-${i}.conf`);
    writeFileSync(
      file,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir.path}`,
        `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${primaryPort} 2`,
        `sentinel down-after-milliseconds ${SENTINEL_NAME} 1000`,
        `sentinel failover-timeout ${SENTINEL_NAME} 5000`,
        `sentinel parallel-syncs ${SENTINEL_NAME} 1`,
        '',
      ].join('\n'),
    );
    children.push(await start([file, '--sentinel']));
    sentinelPorts.push(port);
  }
  const ask = new Redis(sentinelPorts[0] as number, '127.0.0.1', { lazyConnect: true });
  await ask.connect();
  return {
    primaryPort,
    replicaPort,
    replication,
    sentinels: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
    killPrimary: () => (children[0] as ChildProcess).kill('SIGKILL'),
    async currentPrimary() {
      const [, port] = (await ask.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_NAME)) as [string, string];
      return Number(port);
    },
    async stop() {
      ask.disconnect();
      await replication.close();
      await Promise.all(
        children.map(async (child) => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = once(child, 'exit');
          child.kill('SIGKILL');
          await exited;
        }),
      );
      dir.remove();
    },
  };
}
