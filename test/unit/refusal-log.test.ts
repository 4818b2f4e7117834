import { describe, expect, it } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { RefusalLog } from '../../broker/refusal-log.js';
import { logSink } from '../helpers/log-sink.js';

describe('refusal log', () => {
  it('logs a client refused again and again once, then at most once per interval with the count since', () => {
    const sink = logSink();
    const clock = { t: 0 };
    const log = new RefusalLog(createLogger('info', sink.stream), 60_000, () => clock.t);
    for (let i = 0; i < 150; i++) {
      log.refused('cam-1', 'bad password', { clientId: 'cam-1' }, 'connection refused');
      clock.t += 1000;
    }
    // Another client, and another reason of the same client, are their own.
    log.refused('cam-2', 'bad password', { clientId: 'cam-2' }, 'connection refused');
    log.refused('cam-1', 'will topic', { clientId: 'cam-1' }, 'connection refused');
    const lines = sink.lines();
    expect(lines.map((l) => [l.clientId, l.repeats])).toEqual([
      ['cam-1', undefined],
      ['cam-1', 59],
      ['cam-1', 59],
      ['cam-2', undefined],
      ['cam-1', undefined],
    ]);
    expect(lines[1]).toMatchObject({ level: 40, msg: 'connection refused', sinceMs: 60_000 });
  });

  it('keeps a bounded part of a client id as its key: long ids that share it share one entry', () => {
    const sink = logSink();
    const log = new RefusalLog(createLogger('info', sink.stream), 60_000, () => 0);
    const long = 'x'.repeat(256);
    for (let i = 0; i < 10; i++) log.refused(`${long}${i}${'y'.repeat(60_000)}`, 'bad password', {}, 'connection refused');
    log.refused('cam-1', 'bad password', {}, 'connection refused');
    expect(sink.lines()).toHaveLength(2);
  });
});
