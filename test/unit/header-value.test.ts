// Device strings sent in upstream headers: always visible ASCII, decoded back exactly.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { headerValue } from '../../bridge/upstream/header-value.js';

describe('headerValue', () => {
  it('leaves visible ASCII other than % as it is', () => {
    expect(headerValue('line-3/robot-arm')).toBe('line-3/robot-arm');
    expect(headerValue('a%b c')).toBe('a%25b%20c');
  });

  it('gives visible ASCII that decodeURIComponent turns back into the text, for any well-formed text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 128 }), (text) => {
        const sent = headerValue(text);
        expect(sent).toMatch(/^[\x21-\x7e]*$/);
        expect(decodeURIComponent(sent)).toBe(text);
      }),
      { seed: 27, numRuns: 2000 },
    );
  });

  it('sends a lone surrogate as U+FFFD', () => {
    expect(decodeURIComponent(headerValue('a\ud800b'))).toBe('a\ufffdb');
  });
});
