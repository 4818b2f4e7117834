// The upstream simulator as its own process, answering every call after the bench's fixed
// latency, so every system is measured against the same upstream.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { distFile } from './console.js';
import { UPSTREAM_LATENCY_MS } from './plan.js';

export interface Upstream {
  url: string;
  child: ChildProcess;
}

/** `latencyMs` and further simulator options (`--stream-chunk-ms 10`) for benches that need others. */
export async function startUpstream(latencyMs = UPSTREAM_LATENCY_MS, more: string[] = []): Promise<Upstream> {
  const child = spawn(process.execPath, [distFile('upstream-sim/cli.js'), '--port', '0', '--latency-ms', String(latencyMs), ...more], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`upstream-sim exited with ${code}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /listening on (\S+)/.exec(line);
      if (match) resolve(match[1]!);
    });
  });
  return { url, child };
}
