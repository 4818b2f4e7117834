// The pure checks behind the broker's isolation bounds: MAX_TOPIC_LENGTH counts UTF-8 bytes
// exactly (its shortcuts never disagree with encoding the topic), and a browser Origin is
// matched on scheme, host (any case) and port.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { topicTooLong } from '../../broker/topic-length.js';
import { allowedOrigins, originAllowed } from '../../broker/ws-origin.js';

describe('topicTooLong', () => {
  it('agrees with the UTF-8 byte length for any string and limit', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), fc.integer({ min: 16, max: 1200 }), (topic, max) => {
        expect(topicTooLong(topic, max)).toBe(Buffer.byteLength(topic, 'utf8') > max);
      }),
      { seed: 27, numRuns: 2000 },
    );
  });
});

describe('originAllowed', () => {
  const allowed = allowedOrigins(['https://hmi.plant.local', 'http://10.0.0.5:8080']);
  it('lets clients without an Origin through, and only listed browser Origins', () => {
    expect(originAllowed(undefined, allowed)).toBe(true);
    expect(originAllowed('https://HMI.Plant.Local', allowed)).toBe(true);
    expect(originAllowed('https://hmi.plant.local:443', allowed)).toBe(true);
    expect(originAllowed('http://10.0.0.5:8080', allowed)).toBe(true);
    for (const origin of [
      'http://hmi.plant.local',
      'https://hmi.plant.local:8443',
      'https://hmi.plant.local.evil.example',
      'http://10.0.0.5',
      'null',
      '',
      'file://',
      'https://evil.example',
    ]) {
      expect(originAllowed(origin, allowed), origin).toBe(false);
    }
  });
});
