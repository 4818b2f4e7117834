// Streaming to devices: `"stream": true` previews the text on devices/{id}/stream as the
// upstream writes it; the reply on the result topic stays the end of the request. Asserted on
// what the device received and what the upstream was asked.
import { afterEach, describe, expect, it } from 'vitest';
import { StreamChunkSchema, topics, type StreamChunk } from '../../contract/index.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { parseFleetArgs, runFleet } from '../../device-sim/fleet.js';
import { formatTable } from '../../device-sim/summary.js';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { ask, okOf, startHarness, type Device, type Harness } from '../helpers/harness.js';

let h: Harness | undefined;
let fleet: Fleet | undefined;
const sims: UpstreamSim[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  await fleet?.close();
  fleet = undefined;
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

/** Subscribes the device to its stream topic; the chunks it receives, in arrival order. */
async function streamOf(d: Device): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = [];
  d.client.on('message', (topic, payload) => {
    if (topic === topics.stream(d.deviceId)) chunks.push(StreamChunkSchema.parse(JSON.parse(payload.toString())));
  });
  await d.client.subscribeAsync(topics.stream(d.deviceId), { qos: 0 });
  return chunks;
}

const text = (chunks: StreamChunk[]): string => chunks.map((c) => ('delta' in c ? c.delta : '')).join('');

describe('streaming to devices', () => {
  it('sends chunks that add up to exactly the reply, in seq order, batched by STREAM_FLUSH_MS', async () => {
    h = await startHarness({ STREAM_FLUSH_MS: '100' }, { streamChunkMs: 5 });
    const d = await h.device('hmi-1');
    const chunks = await streamOf(d);
    const question = 'Describe the state of conveyor belt four in one long sentence please.';
    await d.publish('high', ask('s1', question, { stream: true }));
    const reply = okOf((await d.reply('s1'))[0]);
    expect(reply.content).toBe(`sim answer to: ${question}`);
    expect(reply.usage?.total_tokens).toBeGreaterThan(0);
    expect(h.upstream.requests[0]?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(chunks.map((c) => c.seq)).toEqual(chunks.map((_, i) => i));
    expect(chunks.every((c) => c.id === 's1' && !('reset' in c))).toBe(true);
    expect(text(chunks)).toBe(reply.content);
    // 11 pieces of 8 characters every 5 ms: batched into far fewer publishes than pieces.
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.length).toBeLessThan(Math.ceil((reply.content ?? '').length / 8));
  });

  it('keeps every chunk within STREAM_FLUSH_BYTES and delivers at STREAM_QOS 1', async () => {
    h = await startHarness({ STREAM_FLUSH_MS: '1000', STREAM_FLUSH_BYTES: '64', STREAM_QOS: '1' }, { streamChunkMs: 1 });
    const d = await h.device('hmi-2');
    const chunks = await streamOf(d);
    await d.client.subscribeAsync(topics.stream(d.deviceId), { qos: 1 });
    const question = 'ü'.repeat(100);
    await d.publish('normal', ask('s2', question, { stream: true }));
    const reply = okOf((await d.reply('s2'))[0]);
    expect(text(chunks)).toBe(reply.content);
    for (const c of chunks) if ('delta' in c) expect(Buffer.byteLength(c.delta)).toBeLessThanOrEqual(64);
    const packets = d.packets.filter((p) => p.topic === topics.stream(d.deviceId));
    expect(packets.length).toBe(chunks.length);
    expect(packets.every((p) => p.qos === 1)).toBe(true);
  });

  it('assembles streamed tool calls into whole calls in the reply', async () => {
    h = await startHarness({}, { streamChunkMs: 1 });
    const d = await h.device('hmi-3');
    const chunks = await streamOf(d);
    const tool = { type: 'function', function: { name: 'lookup_part', parameters: { type: 'object' } } };
    await d.publish('normal', ask('s3', 'Which bin holds part A7?', { stream: true, tools: [tool] }));
    const reply = okOf((await d.reply('s3'))[0]);
    expect(reply).toMatchObject({ finish_reason: 'tool_calls', content: null });
    expect(reply.tool_calls).toEqual([
      { id: 'call_sim_0', type: 'function', function: { name: 'lookup_part', arguments: JSON.stringify({ question: 'Which bin holds part A7?' }) } },
    ]);
    expect(chunks).toEqual([]);
  });

  it('fails over after 3 chunks: a reset, then the fallback text, and its complete answer as the reply', async () => {
    const fallback = await startUpstreamSim({ port: 0, latencyMs: 5, streamChunkMs: 2 });
    sims.push(fallback);
    h = await startHarness({ STREAM_FLUSH_MS: '0', FALLBACK_URL: fallback.url, FALLBACK_MODEL: 'fallback-model' }, { streamChunkMs: 2 });
    // The primary's stream: the role event, then 3 pieces of text, then the connection drops.
    h.upstream.script({ streamBreak: { after: 4, then: 'drop' } });
    const d = await h.device('hmi-4');
    const chunks = await streamOf(d);
    const question = 'What is the torque for bolt M8?';
    await d.publish('critical', ask('s4', question, { stream: true }));
    const reply = okOf((await d.reply('s4'))[0]);
    expect(reply).toMatchObject({ model: 'fallback-model', content: `sim answer to: ${question}` });
    expect(chunks.map((c) => c.seq)).toEqual(chunks.map((_, i) => i));
    const reset = chunks.findIndex((c) => 'reset' in c);
    expect(reset).toBe(3);
    expect(text(chunks.slice(0, reset))).toBe(`sim answer to: ${question}`.slice(0, 24));
    expect(text(chunks.slice(reset + 1))).toBe(reply.content);
    expect(fallback.requests[0]?.body).toMatchObject({ model: 'fallback-model', stream: true });
  });

  it('retries a stream that hangs or breaks with a malformed event, with a reset before the new text', async () => {
    h = await startHarness({ STREAM_FLUSH_MS: '0', UPSTREAM_TIMEOUT_MS: '1500' }, { streamChunkMs: 2 });
    h.upstream.script({ streamBreak: { after: 2, then: 'malformed' } }, { streamBreak: { after: 3, then: 'hang' } });
    const d = await h.device('hmi-5');
    const chunks = await streamOf(d);
    await d.publish('normal', ask('s5', 'Is the guard closed?', { stream: true }));
    const reply = okOf((await d.reply('s5'))[0]);
    expect(reply.attempts).toBe(3);
    const resets = chunks.flatMap((c, i) => ('reset' in c ? [i] : []));
    expect(resets).toHaveLength(2);
    expect(text(chunks.slice((resets[1] ?? 0) + 1))).toBe(reply.content);
  });

  it('answers a device that never subscribed to its stream topic; the panel beside it gets the chunks', async () => {
    h = await startHarness({}, { streamChunkMs: 1 });
    // Same device id (client id up to the first dot): the PLC asks, its HMI panel shows.
    const panel = await h.device('plc-6.panel');
    const chunks = await streamOf(panel);
    const d = await h.device('plc-6');
    await d.publish('low', ask('s6', 'Count the parts.', { stream: true }));
    const reply = okOf((await d.reply('s6'))[0]);
    expect(reply.content).toBe('sim answer to: Count the parts.');
    expect(d.packets.map((p) => p.topic)).toEqual([topics.result('plc-6')]);
    await panel.reply('s6');
    expect(text(chunks)).toBe(reply.content);
  });

  it('streams through the plant broker (external mode) as through the embedded one', async () => {
    h = await startHarness({ STREAM_FLUSH_MS: '0' }, { streamChunkMs: 1 }, undefined, { mode: 'external' });
    const d = await h.device('hmi-8');
    const chunks = await streamOf(d);
    await d.publish('high', ask('s8', 'Report the oven temperature trend.', { stream: true }));
    const reply = okOf((await d.reply('s8'))[0]);
    expect(chunks.map((c) => c.seq)).toEqual(chunks.map((_, i) => i));
    expect(text(chunks)).toBe(reply.content);
  });

  it('streams to a panel connected to another instance on Redis than the one that runs the request', async () => {
    fleet = await startFleet(2, { STREAM_FLUSH_MS: '0' }, { latencyMs: 5, streamChunkMs: 1 });
    const [one, two] = fleet.instances as [NonNullable<Fleet['instances'][0]>, NonNullable<Fleet['instances'][0]>];
    const panel = await two.device('cam-8.panel');
    const chunks = await streamOf(panel);
    const d = await one.device('cam-8');
    await d.publish('high', ask('s9', 'Which shift changed the die?', { stream: true }));
    const reply = okOf((await d.reply('s9'))[0]);
    await panel.reply('s9');
    expect(chunks.map((c) => c.seq)).toEqual(chunks.map((_, i) => i));
    expect(text(chunks)).toBe(reply.content);
  });

  it('refuses stream on an embeddings request by name', async () => {
    h = await startHarness();
    const d = await h.device('hmi-7');
    await d.publish('normal', { id: 'e1', input: 'gear', stream: true });
    const [reply] = await d.reply('e1');
    expect(reply).toMatchObject({ ok: false, error: { code: 'invalid_request', message: expect.stringContaining('stream') } });
  });
});

describe('device-sim --stream', () => {
  it('asks for every answer streamed, reads each first chunk, and reports it per priority before the reply', async () => {
    h = await startHarness({}, { streamChunkMs: 20 });
    const args = parseFleetArgs([
      '--url',
      h.url,
      '--devices',
      '3',
      '--rate',
      '20',
      '--duration',
      '0.5',
      '--stream',
      '--mix',
      'high=1,low=1',
      '--reply-timeout',
      '10',
    ]);
    const report = await runFleet(args);
    expect(report.overall).toMatchObject({ sent: 10, ok: 10, lost: 0, errors: {} });
    expect(h.upstream.requests.every((r) => (r.body as { stream?: boolean }).stream === true)).toBe(true);
    const { firstChunkMs, latencyMs } = report.overall;
    // The answer streams in pieces 20 ms apart, so its first text comes well before its reply.
    expect(firstChunkMs?.max).toBeLessThan(latencyMs?.p50 ?? 0);
    expect(formatTable(report)).toMatch(/chunk p50\s+chunk p99/);
  });
});
