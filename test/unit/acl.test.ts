import { describe, expect, it } from 'vitest';
import { filterWithin, mayPublish, maySubscribe, type Identity } from '../../broker/acl.js';

const device: Identity = { role: 'device', deviceId: 'cam-1' };
const observer: Identity = { role: 'observer', deviceId: undefined };
const operator: Identity = { role: 'operator', deviceId: undefined };

describe('filterWithin', () => {
  it.each([
    ['devices/cam-1/result', 'devices/+/result', true],
    ['devices/+/result', 'devices/cam-1/result', false],
    ['bridge/x/status', 'bridge/#', true],
    ['bridge', 'bridge/#', true],
    ['bridge/#', 'bridge/+/status', false],
    ['devices/cam-1/result/extra', 'devices/+/result', false],
    ['$SYS/broker', '#', false],
    ['$SYS/broker', '+/broker', false],
    ['#', '#', true],
  ])('%s within %s is %s', (filter, pattern, expected) => {
    expect(filterWithin(filter, pattern)).toBe(expected);
  });
});

describe('role rules', () => {
  it('lets a device publish only its own request topics and read only its own namespace and bridge status', () => {
    expect(mayPublish(device, 'devices/cam-1/infer/high')).toBe(true);
    expect(mayPublish(device, 'devices/cam-1/infer/whatever')).toBe(true); // answered invalid_request by intake
    expect(mayPublish(device, 'devices/cam-2/infer/high')).toBe(false);
    expect(mayPublish(device, 'devices/cam-1/result')).toBe(false);
    expect(maySubscribe(device, 'devices/cam-1/result')).toBe(true);
    expect(maySubscribe(device, 'devices/cam-1/rpc/#')).toBe(true); // MQTT 5 response topics
    expect(maySubscribe(device, 'devices/cam-1/#')).toBe(true);
    expect(maySubscribe(device, 'devices/cam-2/rpc/#')).toBe(false);
    expect(maySubscribe(device, 'devices/+/rpc/x')).toBe(false);
    expect(maySubscribe(device, 'bridge/+/status')).toBe(true);
    expect(maySubscribe(device, 'bridge/+/metrics')).toBe(false);
    expect(maySubscribe(device, 'devices/+/result')).toBe(false);
  });

  it('lets an observer read results, requests and bridge topics but publish nothing', () => {
    expect(maySubscribe(observer, 'devices/+/result')).toBe(true);
    expect(maySubscribe(observer, 'devices/+/stream')).toBe(true);
    expect(maySubscribe(observer, 'devices/+/infer/+')).toBe(true);
    expect(maySubscribe(observer, 'bridge/#')).toBe(true);
    expect(maySubscribe(observer, '#')).toBe(false);
    expect(mayPublish(observer, 'devices/cam-1/infer/high')).toBe(false);
  });

  it('lets an operator request for any device and read anything, but never write $SYS', () => {
    expect(mayPublish(operator, 'devices/cam-7/infer/low')).toBe(true);
    expect(maySubscribe(operator, '#')).toBe(true);
    expect(maySubscribe(operator, '$SYS/#')).toBe(true);
    expect(mayPublish(operator, '$SYS/broker/x')).toBe(false);
  });
});
