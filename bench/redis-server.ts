// A private, throw-away redis-server child process: for tests that need a Redis configured
// differently from the shared one (eviction policy, renamed commands, ACL users), and for the
// benchmark when no REDIS_URL is given.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { freePort } from './free-port.js';

export interface PrivateRedis {
  readonly port: number;
  readonly url: string;
  /** For the benchmark's CPU figures. */
  readonly pid: number;
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` on a free port with no persistence; `args` are extra `--name value`
 * directives (later ones win, so `--appendonly yes --dir …` turns persistence on). `port`
 * restarts a Redis on the port a stopped one used (tests of a Redis restart).
 */
export async function startPrivateRedis(args: string[] = [], options: { port?: number } = {}): Promise<PrivateRedis> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const port = options.port ?? (await freePort());
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      await ready(child);
      return {
        port,
        url: `redis://127.0.0.1:${port}`,
        pid: child.pid!,
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = once(child, 'exit');
          child.kill('SIGTERM');
          await exited;
        },
      };
    } catch (err) {
      lastError = err; // most likely the port was taken between freePort() and the bind
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      if (options.port !== undefined) await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw lastError;
}

function ready(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => fail(new Error(`redis-server not ready after 5 s: ${output}`)), 5000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) done();
    };
    const onExit = (code: number | null): void => fail(new Error(`redis-server exited (${code}): ${output}`));
    const cleanup = (): void => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', fail);
    };
    function done(): void {
      cleanup();
      child.stdout?.resume(); // keep draining so the child never blocks on a full pipe
      child.stderr?.resume();
      resolve();
    }
    function fail(err: Error): void {
      cleanup();
      reject(err);
    }
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', onExit);
    child.once('error', fail);
  });
}
