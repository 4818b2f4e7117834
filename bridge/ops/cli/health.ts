// `edge-ai-bridge health [--url URL]`: a running bridge's /readyz, for scripts and operators:
// exit 0 when ready, 1 (with the reasons) when not or when nothing answers.
import { readConfiguration } from '../../config/config.js';
import type { ReadinessState } from '../readiness.js';

const TIMEOUT_MS = 5000;

function fail(code: number, message: string): never {
  process.stderr.write(`edge-ai-bridge: ${message}\n`);
  process.exit(code);
}

/** The admin address the service itself would listen on (HTTP_HOST, HTTP_PORT, from the environment or CONFIG_FILE settings). */
export function defaultUrl(env: NodeJS.ProcessEnv = process.env): string {
  const { HTTP_HOST, HTTP_PORT } = readConfiguration(env).values;
  const host = HTTP_HOST === undefined || HTTP_HOST === '0.0.0.0' || HTTP_HOST === '::' ? '127.0.0.1' : HTTP_HOST;
  const port = HTTP_PORT ?? '9464';
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

function urlOf(args: string[]): string {
  if (args.length === 0) return defaultUrl();
  if (args.length !== 2 || args[0] !== '--url') fail(2, 'usage: health [--url http://HOST:PORT]');
  try {
    return new URL(args[1] as string).origin;
  } catch {
    fail(2, `--url: not a URL: "${args[1]}"`);
  }
}

/** Why a /readyz body is not ready, one reason each. */
export function reasonsOf(state: Partial<ReadinessState>): string[] {
  const reasons: string[] = [];
  if (state.listening === false) reasons.push('stopping');
  if (state.storeReachable === false) reasons.push(`store (${state.store ?? 'unknown'}) unreachable`);
  if (state.brokerConnected === false) reasons.push(`broker (${state.broker ?? 'unknown'}) not connected`);
  const providers = state.providers ?? [];
  if (providers.length > 0 && !providers.some((p) => p.available)) {
    const each = providers.map((p) => `${p.name}: circuit ${p.circuit}, ${p.usableKeys} usable keys`).join('; ');
    reasons.push(`no provider available (${each})`);
  }
  return reasons.length > 0 ? reasons : ['not ready'];
}

export async function runHealth(args: string[]): Promise<void> {
  const url = `${urlOf(args)}/readyz`;
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : err instanceof Error ? err.message : String(err);
    const timedOut = err instanceof Error && err.name === 'TimeoutError';
    fail(1, `${url}: ${timedOut ? `no answer within ${TIMEOUT_MS / 1000} s` : `cannot connect (${cause})`}`);
  }
  let state: Partial<ReadinessState>;
  try {
    state = (await response.json()) as Partial<ReadinessState>;
  } catch {
    fail(1, `${url}: HTTP ${response.status}, not a readiness answer`);
  }
  if (response.ok && state.ready === true) {
    process.stdout.write(`ready (instance ${state.instance ?? '?'}, version ${state.version ?? '?'})\n`);
    return;
  }
  process.stdout.write(`not ready (HTTP ${response.status}): ${reasonsOf(state).join('; ')}\n`);
  process.exit(1);
}
