// AUTH_FILE logins: refused credentials, client ids bound to device ids, the failed-login
// throttle, the hash-password command and the SIGHUP reload of the file.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifyPassword } from '../../broker/auth.js';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startHarness, subscribeGranted, type Harness } from '../helpers/harness.js';
import { connectFrom, connectTcp, disconnectedWithin, tempDir, writeAuthFile, type TestUser } from '../helpers/security.js';

const USERS: TestUser[] = [
  { username: 'cam-017', password: 'cam-017-pw', role: 'device', device_id: 'cam-017' },
  { username: 'scada', password: 'scada-pw', role: 'observer' },
];

const dir = tempDir();
const authFile = join(dir.path, 'auth.json');
beforeAll(() => writeAuthFile(authFile, USERS));
afterAll(() => dir.remove());

describe('logins with AUTH_FILE', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness({ AUTH_FILE: authFile, ALLOW_ANONYMOUS: 'false' });
  });
  afterEach(async () => {
    await h.close();
  });

  it('accepts good credentials and refuses a wrong password, an unknown user and anonymous clients', async () => {
    const port = h.bridge.mqttPort;
    const ok = await connectTcp(port, { clientId: 'cam-017.pub', username: 'cam-017', password: 'cam-017-pw' });
    expect(await subscribeGranted(ok, ['devices/cam-017/result', 'devices/cam-018/result'])).toEqual([1, 128]);
    await ok.endAsync();

    await expect(connectTcp(port, { clientId: 'cam-017', username: 'cam-017', password: 'wrong' })).rejects.toThrow(/Bad username or password/i);
    await expect(connectTcp(port, { clientId: 'cam-017', username: 'nobody', password: 'cam-017-pw' })).rejects.toThrow(/Bad username or password/i);
    await expect(connectTcp(port, { clientId: 'cam-017' })).rejects.toThrow(/Not authorized/i);
    expect(h.bridge.broker!.refusals.login).toBe(2);
    expect(h.bridge.broker!.refusals.connect).toBe(3);
  });

  it("refuses a device whose client id is not its device_id (or device_id + '.')", async () => {
    const port = h.bridge.mqttPort;
    const creds = { username: 'cam-017', password: 'cam-017-pw' };
    await expect(connectTcp(port, { clientId: 'cam-018', ...creds })).rejects.toThrow(/Identifier rejected/i);
    await expect(connectTcp(port, { clientId: 'cam-0170', ...creds })).rejects.toThrow(/Identifier rejected/i);
    const sub = await connectTcp(port, { clientId: 'cam-017.sub', ...creds });
    await sub.endAsync();
  });

  it("refuses an observer taking a registered device's client id, and keeps that device connected", async () => {
    const port = h.bridge.mqttPort;
    const device = await connectTcp(port, { clientId: 'cam-017', username: 'cam-017', password: 'cam-017-pw' });
    let deviceClosed = false;
    device.on('close', () => (deviceClosed = true));
    const scada = { username: 'scada', password: 'scada-pw' };
    await expect(connectTcp(port, { clientId: 'cam-017', ...scada })).rejects.toThrow(/Identifier rejected/i);
    await expect(connectTcp(port, { clientId: 'cam-017.x', ...scada })).rejects.toThrow(/Identifier rejected/i);
    const observer = await connectTcp(port, { clientId: 'scada-dashboard-1', ...scada });
    await new Promise((r) => setTimeout(r, 100));
    expect(deviceClosed).toBe(false);
    await observer.endAsync();
    await device.endAsync();
  });
});

describe('anonymous clients next to AUTH_FILE', () => {
  it('are allowed on loopback when ALLOW_ANONYMOUS is unset (the contract default)', async () => {
    const h = await startHarness({ AUTH_FILE: authFile });
    try {
      const anon = await connectTcp(h.bridge.mqttPort, { clientId: 'cam-anon' });
      expect(await subscribeGranted(anon, ['devices/cam-anon/result'])).toEqual([1]);
      await anon.endAsync();
    } finally {
      await h.close();
    }
  });
});

describe('failed-login throttle', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness({ AUTH_FILE: authFile });
  });
  afterEach(async () => {
    await h.close();
  });

  const timed = async (attempt: () => Promise<unknown>): Promise<number> => {
    const started = Date.now();
    await attempt().then(
      (c) => (c as { end(force: boolean): void }).end(true),
      () => undefined,
    );
    return Date.now() - started;
  };

  it('slows down a burst of bad passwords from one address, leaving other addresses alone', async () => {
    const port = h.bridge.mqttPort;
    const bad = { clientId: 'cam-017', username: 'cam-017', password: 'guess' };
    const fast: number[] = [];
    for (let i = 0; i < 5; i += 1) fast.push(await timed(() => connectFrom('127.0.0.1', port, bad)));
    expect(Math.max(...fast)).toBeLessThan(800);
    const sixth = await timed(() => connectFrom('127.0.0.1', port, bad));
    const seventh = await timed(() => connectFrom('127.0.0.1', port, bad));
    expect(sixth).toBeGreaterThanOrEqual(900);
    expect(seventh).toBeGreaterThanOrEqual(1900);
    expect(h.bridge.broker!.refusals.throttled).toBeGreaterThanOrEqual(2);

    // Another address logs in at once, with the right and the wrong password alike.
    const good = await timed(() => connectFrom('127.0.0.2', port, { ...bad, password: 'cam-017-pw' }));
    const otherBad = await timed(() => connectFrom('127.0.0.2', port, bad));
    expect(good).toBeLessThan(800);
    expect(otherBad).toBeLessThan(800);
  }, 20_000);
});

describe('hash-password', () => {
  it('prints a self-describing scrypt hash of stdin (one trailing newline stripped) that verifies', async () => {
    const cli = fileURLToPath(new URL('../../dist/bridge/cli.js', import.meta.url));
    const out = execFileSync(process.execPath, [cli, 'hash-password'], { input: 'correct horse\n' }).toString();
    const hash = out.trim();
    expect(hash).toMatch(/^scrypt\$16384\$8\$1\$[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/=]+$/);
    expect(await verifyPassword('correct horse', hash)).toBe(true);
    expect(await verifyPassword('correct horse\n', hash)).toBe(false);
    const again = execFileSync(process.execPath, [cli, 'hash-password'], { input: 'correct horse\n' }).toString().trim();
    expect(again).not.toBe(hash); // a fresh salt each time
  });
});

describe('the service process', () => {
  let service: ServiceProcess | undefined;
  afterEach(async () => {
    await service?.stop();
    service = undefined;
  });

  it('refuses to start with a bad AUTH_FILE (exit 2, naming AUTH_FILE)', async () => {
    const bad = join(dir.path, 'bad.json');
    writeFileSync(bad, JSON.stringify({ users: [{ username: 'x', password_hash: 'plain', role: 'device' }] }));
    await expect(startServiceProcess({ AUTH_FILE: bad })).rejects.toThrow(/exited with 2 .*AUTH_FILE/);
  });

  it('re-reads AUTH_FILE on SIGHUP: a new user logs in and existing connections stay up', async () => {
    const file = join(dir.path, 'reload.json');
    await writeAuthFile(file, USERS);
    service = await startServiceProcess({ AUTH_FILE: file, ALLOW_ANONYMOUS: 'false', LOG_LEVEL: 'info' });
    const port = service.mqttPort;
    const existing = await connectTcp(port, { clientId: 'cam-017', username: 'cam-017', password: 'cam-017-pw' });
    const newUser = { clientId: 'cam-042', username: 'cam-042', password: 'new-pw' };
    await expect(connectTcp(port, newUser)).rejects.toThrow(/Bad username or password/i);

    await writeAuthFile(file, [...USERS, { username: 'cam-042', password: 'new-pw', role: 'device', device_id: 'cam-042' }]);
    service.child.kill('SIGHUP');
    const deadline = Date.now() + 5000;
    while (!service.logs.some((l) => l.msg === 'auth file reloaded') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(service.logs.find((l) => l.msg === 'auth file reloaded')).toMatchObject({ users: 3 });

    const added = await connectTcp(port, newUser);
    expect(await subscribeGranted(added, ['devices/cam-042/result'])).toEqual([1]);
    expect(await disconnectedWithin(existing, 200)).toBe(false);
    await existing.subscribeAsync('devices/cam-017/result'); // still a working session
    await added.endAsync();
    await existing.endAsync();
    // Nothing logged the password.
    expect(JSON.stringify(service.logs)).not.toMatch(/new-pw|cam-017-pw/);
  });
});
