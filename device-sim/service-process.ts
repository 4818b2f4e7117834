// Runs the compiled service as a child process on free ports and reads its bound ports
// from its "bridge ready" log line; shared by the demo, the benchmark and process tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

export interface ServiceProcess {
  child: ChildProcess;
  mqttPort: number;
  httpPort: number;
  /** Every log line the service printed, parsed. */
  logs: Array<Record<string, unknown>>;
  stderr: () => string;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

/**
 * The built entry `npm start` runs (dist/bridge/main-with-simulator.js: the bundled upstream
 * simulator while UPSTREAM_URL is unset), or the service's own (`main`), found from this file
 * whether it runs from source or from dist/.
 */
export function mainScript(entry: 'main-with-simulator' | 'main' = 'main-with-simulator'): string {
  for (const rel of [`../bridge/${entry}.js`, `../dist/bridge/${entry}.js`]) {
    const path = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(path) && path.includes('/dist/')) return path;
  }
  throw new Error(`dist/bridge/${entry}.js is missing: run \`npm run build\` first`);
}

export interface ServiceProcessOptions {
  readyTimeoutMs?: number;
  /** Another program that prints the same "bridge ready" line (the benchmark's echo broker). */
  script?: string;
  /** Node's own flags (--cpu-prof, which NODE_OPTIONS refuses). */
  nodeArgs?: string[];
}

export async function startServiceProcess(env: Record<string, string>, options: ServiceProcessOptions = {}): Promise<ServiceProcess> {
  const { readyTimeoutMs = 15_000, script = mainScript(), nodeArgs = [] } = options;
  const child = spawn(process.execPath, [...nodeArgs, script], {
    env: { PATH: process.env.PATH ?? '', MQTT_PORT: '0', HTTP_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Array<Record<string, unknown>> = [];
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = new Promise<{ mqttPort: number; httpPort: number }>((resolve, reject) => {
    // A service that never became ready is killed: the caller has no handle to stop it.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`service not ready after ${readyTimeoutMs} ms: ${stderr}`));
    }, readyTimeoutMs);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`service exited with ${code} before it was ready: ${stderr.trim()}`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(entry);
      if (entry.msg === 'bridge ready') {
        clearTimeout(timer);
        resolve({ mqttPort: Number(entry.mqttPort), httpPort: Number(entry.httpPort) });
      }
    });
  });
  const ports = await ready;
  return {
    child,
    ...ports,
    logs,
    stderr: () => stderr,
    exited,
    stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
