// The stream publisher's batching (one publish per flush interval, sooner at flushBytes),
// its seq numbering across resets, and pieces that never cut a UTF-8 character.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { PublishOptions, StreamChunk } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { StreamPublisher, utf8Pieces } from '../../bridge/results/stream.js';

function publisher(flushMs: number, flushBytes = 512) {
  const sent: Array<{ topic: string; chunk: StreamChunk; options: PublishOptions }> = [];
  const publish = async (topic: string, payload: Buffer, options: PublishOptions): Promise<void> => {
    sent.push({ topic, chunk: JSON.parse(payload.toString()) as StreamChunk, options });
  };
  const stream = new StreamPublisher(publish, 'cam-1', 'r1', { flushMs, flushBytes, qos: 0 }, createLogger('silent'));
  return { stream, sent };
}

describe('StreamPublisher', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('publishes the first piece at once, then gathers the rest until the interval has passed', async () => {
    vi.useFakeTimers();
    const { stream, sent } = publisher(60);
    stream.delta('Hello');
    stream.delta(', ');
    await vi.advanceTimersByTimeAsync(59);
    stream.delta('world');
    expect(sent.map((s) => s.chunk)).toEqual([{ id: 'r1', seq: 0, delta: 'Hello' }]);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent.map((s) => s.chunk)).toEqual([
      { id: 'r1', seq: 0, delta: 'Hello' },
      { id: 'r1', seq: 1, delta: ', world' },
    ]);
    expect(sent[0]).toMatchObject({ topic: 'devices/cam-1/stream', options: { qos: 0, retain: false } });
  });

  it('sends at once when flushBytes have gathered, in pieces of at most that size', async () => {
    const { stream, sent } = publisher(10_000, 64);
    stream.delta('a');
    stream.delta('b'.repeat(100));
    await stream.close();
    expect(sent.map((s) => s.chunk)).toEqual([
      { id: 'r1', seq: 0, delta: 'a' },
      { id: 'r1', seq: 1, delta: 'b'.repeat(64) },
      { id: 'r1', seq: 2, delta: 'b'.repeat(36) },
    ]);
  });

  it('drops what is pending on a reset, which takes the next seq', async () => {
    const { stream, sent } = publisher(10_000);
    stream.delta('first ');
    stream.delta('lost');
    stream.reset();
    stream.delta('second');
    await stream.close();
    expect(sent.map((s) => s.chunk)).toEqual([
      { id: 'r1', seq: 0, delta: 'first ' },
      { id: 'r1', seq: 1, reset: true },
      { id: 'r1', seq: 2, delta: 'second' },
    ]);
  });

  it('never cuts a character: pieces of at most maxBytes bytes of UTF-8', () => {
    const text = 'aü€😀'.repeat(20);
    const pieces = utf8Pieces(text, 7);
    expect(pieces.join('')).toBe(text);
    for (const piece of pieces) expect(Buffer.byteLength(piece)).toBeLessThanOrEqual(7);
    expect(utf8Pieces('short', 64)).toEqual(['short']);
  });
});
