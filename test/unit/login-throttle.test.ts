import { describe, expect, it } from 'vitest';
import { LoginThrottle, parseHash } from '../../broker/auth.js';

describe('LoginThrottle', () => {
  const make = () => {
    let t = 0;
    const throttle = new LoginThrottle({ threshold: 5, windowMs: 60_000, baseDelayMs: 1000, maxDelayMs: 30_000 }, () => t);
    return { throttle, at: (ms: number) => (t = ms) };
  };

  it('lets 5 failures through, then spaces attempts 1 s, 2 s, 4 s… apart, per address', () => {
    const { throttle, at } = make();
    for (let i = 0; i < 5; i += 1) {
      expect(throttle.admit('a')).toBe(0);
      throttle.fail('a');
    }
    expect(throttle.admit('a')).toBe(1000);
    at(1000);
    throttle.fail('a');
    expect(throttle.admit('a')).toBe(2000);
    at(3000);
    throttle.fail('a');
    expect(throttle.admit('a')).toBe(4000);
    expect(throttle.admit('b')).toBe(0); // another address is unaffected
  });

  it('refuses outright once the wait would pass the cap, and forgets failures after the window', () => {
    const { throttle, at } = make();
    for (let i = 0; i < 12; i += 1) throttle.fail('a');
    const waits: Array<number | null> = [];
    for (let i = 0; i < 4; i += 1) waits.push(throttle.admit('a'));
    expect(waits[0]).toBe(1000); // the next slot is then 30 s (capped) later
    expect(waits.slice(1)).toEqual([null, null, null]);
    at(200_000);
    expect(throttle.admit('a')).toBe(0);
    expect(throttle.failures('a')).toBe(0);
  });

  it('parses only well-formed, bounded scrypt hashes', () => {
    expect(parseHash('scrypt$16384$8$1$YIduXVKQjdKY6fxd9LpNZw==$Nz1bP3eDjrwSF/d0hzVOZzPih6TLZ542z+4wCj4eLzg=')).not.toBeNull();
    expect(parseHash('scrypt$1048577$8$1$YIduXVKQjdKY6fxd9LpNZw==$Nz1bP3eDjrwSF/d0hzVOZzPih6TLZ542z+4wCj4eLzg=')).toBeNull();
    expect(parseHash('scrypt$4194304$8$1$YIduXVKQjdKY6fxd9LpNZw==$Nz1bP3eDjrwSF/d0hzVOZzPih6TLZ542z+4wCj4eLzg=')).toBeNull();
    expect(parseHash('bcrypt$x')).toBeNull();
  });
});
