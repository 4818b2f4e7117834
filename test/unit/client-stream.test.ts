// The client's stream assembly alone: chunks lost, repeated or restarted still end in exactly
// the reply's content after the last reset.
import { describe, expect, it } from 'vitest';
import type { OkReply } from '../../contract/index.js';
import { BridgeStream, type StreamEvent } from '../../client/stream.js';

const reply = (content: string | null): OkReply =>
  ({
    id: 'r',
    ok: true,
    model: 'm',
    content,
    finish_reason: 'stop',
    cached: false,
    attempts: 1,
    priority: 'normal',
    timing: { queued_ms: 0, upstream_ms: 0, total_ms: 0 },
  }) as OkReply;

async function run(chunks: Array<{ seq: number; delta?: string; reset?: boolean }>, content: string | null): Promise<StreamEvent[]> {
  let resolve!: (r: OkReply) => void;
  const stream = new BridgeStream(new Promise<OkReply>((r) => (resolve = r)));
  for (const chunk of chunks) stream.chunk(chunk);
  resolve(reply(content));
  const events: StreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

const shown = (events: StreamEvent[]): string => events.reduce((text, e) => ('reset' in e ? '' : text + e.delta), '');

describe('client stream assembly', () => {
  it('passes whole streams through unchanged', async () => {
    expect(
      await run(
        [
          { seq: 0, delta: 'ab' },
          { seq: 1, delta: 'cd' },
        ],
        'abcd',
      ),
    ).toEqual([{ delta: 'ab' }, { delta: 'cd' }]);
  });

  it('mends a lost chunk with a reset and the whole content', async () => {
    const events = await run(
      [
        { seq: 0, delta: 'ab' },
        { seq: 2, delta: 'ef' },
      ],
      'abcdef',
    );
    expect(events.slice(-2)).toEqual([{ reset: true }, { delta: 'abcdef' }]);
    expect(shown(events)).toBe('abcdef');
  });

  it('ignores a repeated chunk and starts afresh when seq 0 comes again (a takeover)', async () => {
    const events = await run(
      [
        { seq: 0, delta: 'ab' },
        { seq: 0, delta: 'ab' },
        { seq: 1, delta: 'cd' },
        { seq: 1, delta: 'cd' },
      ],
      'abcd',
    );
    expect(events).toEqual([{ delta: 'ab' }, { reset: true }, { delta: 'ab' }, { delta: 'cd' }]);
  });

  it('keeps a reset the bridge sent, and ends empty for a reply without content (tool calls)', async () => {
    expect(
      shown(
        await run(
          [
            { seq: 0, delta: 'ab' },
            { seq: 1, reset: true },
            { seq: 2, delta: 'xy' },
          ],
          'xy',
        ),
      ),
    ).toBe('xy');
    expect(shown(await run([{ seq: 0, delta: 'ab' }], null))).toBe('');
  });
});
