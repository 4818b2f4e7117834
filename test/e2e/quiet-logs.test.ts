// Logs an operator can live with: a condition that repeats (the plant's broker out of reach,
// Redis down) is one warning when it starts, at most one per interval with the count of
// repeats since, and one info line when it ends; expected network errors carry no stack
// trace, and a clean stop logs no "connection lost" warning.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startBridge, type RunningBridge } from '../../bridge/app.js';
import { loadConfig } from '../../bridge/config/config.js';
import { createLogger } from '../../bridge/logger.js';
import { startPrivateRedis, type PrivateRedis } from '../../bench/redis-server.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { sleep } from '../helpers/harness.js';
import { logSink, type LogSink } from '../helpers/log-sink.js';
import { startMosquitto, type Mosquitto } from '../helpers/mosquitto.js';
import { uniquePrefix } from '../helpers/redis.js';
import { eventually } from '../helpers/wait.js';

const INTERVAL_MS = 1000;
/** An outage held on purpose over a few repeat-log intervals: a start line, repeats, then the end line. */
const OUTAGE_MS = 3.5 * INTERVAL_MS;

type Line = Record<string, unknown> & { level: number; msg: string; time: number };

let bridge: RunningBridge | undefined;
let upstream: UpstreamSim | undefined;
const closers: Array<() => Promise<unknown>> = [];

// A bridge left running by a failed test may stop slowly while its Redis is away.
afterEach(async () => {
  await bridge?.shutdown();
  await upstream?.close();
  for (const close of closers.splice(0)) await close();
  bridge = upstream = undefined;
}, 60_000);

async function start(env: Record<string, string>, sink: LogSink): Promise<RunningBridge> {
  upstream = await startUpstreamSim({ port: 0, latencyMs: 5 });
  const config = loadConfig({ MQTT_PORT: '0', HTTP_PORT: '0', LOG_LEVEL: 'info', OVERLOAD_DELAY_MS: '0', ...env });
  return startBridge({ ...config, upstreamUrl: upstream.url }, createLogger('info', sink.stream), undefined, { repeatLogIntervalMs: INTERVAL_MS });
}

const linesOf = (sink: LogSink): Line[] => sink.lines() as Line[];

/**
 * The condition's lines: the start (warn), repeats at least an interval apart each with a
 * count, nothing more than the interval allows over `spanMs`, and no stack trace in any line.
 */
function expectSummarized(lines: Line[], messages: { started: string; repeating: string }, spanMs: number): Line[] {
  const condition = lines.filter((l) => l.msg === messages.started || l.msg === messages.repeating);
  expect(condition.filter((l) => l.msg === messages.started)).toHaveLength(1);
  expect(condition[0]).toMatchObject({ level: 40, msg: messages.started });
  for (let i = 1; i < condition.length; i += 1) {
    const line = condition[i] as Line;
    expect(line).toMatchObject({ level: 40, msg: messages.repeating });
    expect(line.repeats as number).toBeGreaterThan(0);
    // forMs counts from the start line, on the clock the interval is kept on.
    expect((line.forMs as number) - Number((condition[i - 1] as Line).forMs ?? 0)).toBeGreaterThanOrEqual(INTERVAL_MS);
  }
  expect(condition.length).toBeLessThanOrEqual(1 + Math.ceil(spanMs / INTERVAL_MS));
  expect(JSON.stringify(lines)).not.toContain('"stack"');
  return condition;
}

/** A clean stop: "stopped" logged, and not one warning on the way (connections closing are expected). */
async function expectQuietStop(sink: LogSink, running: RunningBridge): Promise<void> {
  const from = linesOf(sink).length;
  await running.shutdown();
  const stopping = linesOf(sink).slice(from);
  expect(stopping.map((l) => l.msg)).toContain('stopped');
  expect(stopping.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([]);
}

describe('quiet logs', () => {
  it(
    'the plant broker out of reach: a start line, one per interval with a count, an end line once it is back; a clean stop warns nothing',
    { timeout: 30_000 },
    async () => {
      const mq: Mosquitto = await startMosquitto();
      closers.push(() => mq.close());
      await mq.stop(); // its port is now closed
      const sink = logSink();
      const instance = `quiet-${randomBytes(3).toString('hex')}`;
      const startedAt = Date.now();
      // The start waits for the broker (the status message), so it resolves only once it is back.
      const starting = start({ BROKER_URL: mq.url, INSTANCE_ID: instance }, sink);
      await sleep(OUTAGE_MS);
      const messages = { started: 'broker unreachable: unready, retrying; requests wait in the broker meanwhile', repeating: 'broker still unreachable' };
      const condition = expectSummarized(linesOf(sink), messages, Date.now() - startedAt);
      expect(condition[0]).toMatchObject({ code: 'ECONNREFUSED', err: expect.stringMatching(/ECONNREFUSED/) as unknown });
      // Four connections retrying every 500 ms failed far more often than that was logged.
      const logged = condition.reduce((n, l) => n + 1 + Number(l.repeats ?? 0), 0);
      expect(logged).toBeGreaterThan(condition.length);

      await mq.restart();
      bridge = await starting;
      await eventually('the end line', () => linesOf(sink).some((l) => l.msg === 'broker reachable again'), 10_000);
      const ended = linesOf(sink).filter((l) => l.msg === 'broker reachable again');
      expect(ended).toHaveLength(1);
      expect(ended[0]).toMatchObject({ level: 30 });
      expect(ended[0]?.count as number).toBeGreaterThanOrEqual(logged);
      expect(ended[0]?.forMs as number).toBeGreaterThanOrEqual(OUTAGE_MS);

      const running = bridge;
      bridge = undefined;
      await expectQuietStop(sink, running);
    },
  );

  it('Redis down: a start line, one per interval with a count, an end line once it is back; a clean stop warns nothing', { timeout: 30_000 }, async () => {
    const first: PrivateRedis = await startPrivateRedis();
    closers.push(() => first.stop());
    const sink = logSink();
    bridge = await start({ REDIS_URL: first.url, REDIS_PREFIX: uniquePrefix('quiet') }, sink);
    const from = linesOf(sink).length;
    const downAt = Date.now();
    await first.stop();
    await sleep(OUTAGE_MS);
    const outage = linesOf(sink).slice(from);
    const messages = { started: 'Redis unavailable: unready, retrying; new requests are answered unavailable meanwhile', repeating: 'Redis still unavailable' };
    expectSummarized(outage, messages, Date.now() - downAt);
    // Nothing else at warn or above: every part that met the outage reported it there.
    expect(outage.filter((l) => l.level >= 40 && l.msg !== messages.started && l.msg !== messages.repeating).map((l) => l.msg)).toEqual([]);

    const second = await startPrivateRedis([], { port: first.port });
    closers.push(() => second.stop());
    await eventually('the end line', () => linesOf(sink).some((l) => l.msg === 'Redis available again'), 10_000);
    const ended = linesOf(sink).filter((l) => l.msg === 'Redis available again');
    expect(ended).toHaveLength(1);
    expect(ended[0]).toMatchObject({ level: 30 });
    expect(ended[0]?.forMs as number).toBeGreaterThanOrEqual(OUTAGE_MS);

    const running = bridge;
    bridge = undefined;
    await expectQuietStop(sink, running);
  });
});
