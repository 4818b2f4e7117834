// device-sim as a tester runs it (runDeviceSim, the command's code in-process): a fleet where
// each device logs in with its own id and password to a Mosquitto whose ACL is per device,
// with a bridge joined to it (BROKER_URL); and the hints when nothing answers.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runDeviceSim } from '../../device-sim/cli.js';
import type { FleetReport } from '../../device-sim/stats.js';
import { startHarness, type Harness } from '../helpers/harness.js';
import { PLANT_ACL, startMosquitto, type Mosquitto } from '../helpers/mosquitto.js';
import { tempDir } from '../helpers/security.js';

const DEVICES = ['cam-1', 'cam-2', 'cam-3'];
const PASSWORDS = Object.fromEntries(DEVICES.map((id) => [id, `pw-${id}-${randomBytes(3).toString('hex')}`]));
const USERS = { ...PASSWORDS, bridge: 'pw-bridge' };

const dir = tempDir('device-sim-');
afterAll(() => dir.remove());

let h: Harness | undefined;
let mosquitto: Mosquitto | undefined;
afterEach(async () => {
  await h?.close();
  await mosquitto?.close();
  h = undefined;
  mosquitto = undefined;
});

interface Outcome {
  code: number;
  report?: FleetReport;
  stdout: string;
  stderr: string;
}

async function deviceSim(argv: string[], plainIntervalMs?: number): Promise<Outcome> {
  let stdout = '';
  let stderr = '';
  const { code, report } = await runDeviceSim(argv, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text), isTTY: false },
    ...(plainIntervalMs === undefined ? {} : { plainIntervalMs }),
  });
  return { code, stdout, stderr, ...(report === undefined ? {} : { report }) };
}

function passwordFile(lines: string[]): string {
  const path = join(dir.path, `passwords-${randomBytes(3).toString('hex')}`);
  writeFileSync(path, `# device logins\n${lines.join('\n')}\n`);
  return path;
}

/** A bridge joined to a Mosquitto with a password per device and the plant ACL (devices/%u/…). */
async function plant(): Promise<Harness> {
  h = await startHarness({ INSTANCE_ID: `ds-${randomBytes(3).toString('hex')}`, BROKER_USERNAME: 'bridge', BROKER_PASSWORD: USERS.bridge }, {}, undefined, {
    mode: 'external',
    mosquitto: { users: USERS, acl: [...PLANT_ACL] },
  });
  return h;
}

const fleet = (url: string, more: string[]): string[] => [
  '--url',
  url,
  '--devices',
  '3',
  '--prefix',
  'cam',
  '--rate',
  '15',
  '--duration',
  '1',
  '--reply-timeout',
  '10',
  ...more,
];

/** Which devices the upstream heard from (each request's text names its device). */
function devicesHeard(harness: Harness): string[] {
  const ids = harness.upstream.requests.map((r) => /device (\S+) request/.exec(JSON.stringify(r.body))?.[1]);
  return [...new Set(ids)].filter((id): id is string => id !== undefined).sort();
}

describe('device-sim logins against a broker whose ACL is per device', () => {
  it('--username-from-id with a password file: every device logs in as itself and gets its answers', async () => {
    const harness = await plant();
    const file = passwordFile(DEVICES.map((id) => `${id}:${PASSWORDS[id]}`));
    const run = await deviceSim(fleet(harness.url, ['--username-from-id', '--password-file', file, '--json']));
    expect(run.stderr).not.toMatch(/refused/);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as FleetReport;
    expect(report.overall).toMatchObject({ sent: 15, ok: 15, errors: {}, lost: 0 });
    expect(report.hints).toEqual([]);
    expect(devicesHeard(harness)).toEqual(DEVICES);
  });

  it('one login for the whole fleet: the ACL refuses the other devices, and the hint names the PUBACK reason', async () => {
    const harness = await plant();
    const run = await deviceSim(fleet(harness.url, ['--username', 'cam-1', '--password', PASSWORDS['cam-1']!, '--mqtt5', '--json']));
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as FleetReport;
    // Round robin: cam-1 sends 5 of the 15; the broker refuses the 10 of cam-2 and cam-3.
    expect(report.overall).toMatchObject({ sent: 15, ok: 5, errors: { publish_refused: 10 }, lost: 0 });
    expect(report.diagnosis.publishesRefused).toEqual({ '0x87 Not authorized': 10 });
    expect(report.hints.join('\n')).toMatch(/refused publishes: 10 × 0x87 Not authorized \(first: cam-[23]: PUBACK 0x87/);
    expect(devicesHeard(harness)).toEqual(['cam-1']);
  });

  it('a wrong password in the file: the run stops at once, naming the user the broker refused', async () => {
    const harness = await plant();
    const file = passwordFile(DEVICES.map((id) => `${id}:${id === 'cam-2' ? 'wrong' : PASSWORDS[id]}`));
    const run = await deviceSim(fleet(harness.url, ['--username-from-id', '--password-file', file, '--connect-concurrency', '1']));
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/device-sim: device cam-2: the broker at 127\.0\.0\.1:\d+ refused the login of user "cam-2": .*\(CONNACK \d+\)/);
    expect(harness.upstream.requests).toHaveLength(0);
  });

  it('--workers: the same logins, and the same report as the mqtt.js fleet (build first)', async () => {
    const harness = await plant();
    const file = passwordFile(DEVICES.map((id) => `${id}:${PASSWORDS[id]}`));
    const threaded = await deviceSim(fleet(harness.url, ['--username-from-id', '--password-file', file, '--workers', '2', '--json']));
    expect(threaded.code).toBe(0);
    const report = JSON.parse(threaded.stdout) as FleetReport;
    // Each worker paces its share by whole requests: a request or two short of 15 at most.
    expect(report.overall.sent).toBeGreaterThanOrEqual(13);
    expect(report.overall).toMatchObject({ ok: report.overall.sent, errors: {}, lost: 0 });
    expect(Object.values(report.byPriority).reduce((n, row) => n + row.ok, 0)).toBe(report.overall.sent);
    for (const id of DEVICES) expect(harness.mosquitto?.logs()).toContain(`u'${id}'`);

    const single = await deviceSim(fleet(harness.url, ['--username-from-id', '--password-file', file, '--json']));
    const other = JSON.parse(single.stdout) as FleetReport;
    expect(Object.keys(report).sort()).toEqual(Object.keys(other).sort());
    expect(Object.keys(report.overall).sort()).toEqual(Object.keys(other.overall).sort());
    expect(Object.keys(report.diagnosis).sort()).toEqual(Object.keys(other.diagnosis).sort());
    expect({ ...report.config, workers: 0 }).toEqual(other.config);
    // The table too: the same header for both engines.
    const table = await deviceSim(fleet(harness.url, ['--username-from-id', '--password-file', file, '--workers', '1']));
    const header = (out: string): string | undefined => out.split('\n')[1];
    expect(header(table.stdout)).toMatch(/^priority\s+sent\s+ok\s+errors\s+lost\s+p50 ms/);
    expect(header(table.stdout)).toBe(header((await deviceSim(fleet(harness.url, ['--username-from-id', '--password-file', file]))).stdout));
  });

  it('a password file without a line for a device is refused before anything connects (exit 2)', async () => {
    const file = passwordFile(['cam-1:a', 'cam-2:b']);
    const run = await deviceSim(fleet('mqtt://127.0.0.1:1', ['--username-from-id', '--password-file', file]));
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(`device-sim: --password-file ${file}: no line for user "cam-3" (device cam-3)\n`);
  });
});

describe('device-sim hints when nothing answers', () => {
  it('a broker with no bridge: the progress line and the report say no bridge status was seen', async () => {
    mosquitto = await startMosquitto();
    const run = await deviceSim(['--url', mosquitto.url, '--devices', '2', '--rate', '4', '--duration', '1', '--reply-timeout', '5', '--json'], 250);
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as FleetReport;
    expect(report.overall).toMatchObject({ sent: 4, ok: 0, lost: 4 });
    expect(report.diagnosis).toMatchObject({ statusWatched: true, bridges: {} });
    expect(report.hints).toEqual([expect.stringMatching(/^no answer and no bridge status seen on bridge\/\+\/status/)]);
    // Not a terminal: plain lines on stderr, the hint on those after 5 s without an answer.
    const lines = run.stderr.split('\n').filter((line) => /^device-sim: \d+\.\d s /.test(line));
    expect(lines.length).toBeGreaterThan(5);
    expect(lines[0]).toMatch(/sent \d+ {2}answered 0 {2}ok 0 {2}errors none {2}in flight \d+ {2}0\.0\/s$/);
    // The last line may come after the reply timeout gave the four up (in flight 0) on a slow machine.
    expect(lines.at(-1)).toMatch(/sent 4 {2}answered 0 {2}ok 0 {2}errors none {2}in flight [04] {2}0\.0\/s {2}— no answer and no bridge status seen/);
    expect(run.stderr).not.toContain('\r');
  });

  it("the bridge's own broker refuses the devices' topics: subscription and publish refusals, the bridge seen online", async () => {
    // Topics of 16 bytes at most: bridge/+/status passes, devices/sim-1/… does not.
    h = await startHarness({ MAX_TOPIC_LENGTH: '16', INSTANCE_ID: 'ds-embedded' });
    const run = await deviceSim(['--url', h.url, '--devices', '1', '--rate', '4', '--duration', '0.5', '--reply-timeout', '2', '--mqtt5', '--json']);
    const report = JSON.parse(run.stdout) as FleetReport;
    expect(report.overall).toMatchObject({ sent: 2, ok: 0, errors: { publish_refused: 2 } });
    expect(report.diagnosis).toMatchObject({ bridges: { 'ds-embedded': 'online' }, subscriptionsRefused: 1, publishesRefused: { '0x87 Not authorized': 2 } });
    expect(report.hints).toEqual([
      expect.stringMatching(/^the broker refused 1 device\(s\) their result topic \(first: sim-1: devices\/sim-1\/result \(SUBACK 0x87 Not authorized\)\)/),
      expect.stringMatching(
        /^the broker refused publishes: 2 × 0x87 Not authorized \(first: sim-1: PUBACK 0x87 Not authorized "topic longer than MAX_TOPIC_LENGTH/,
      ),
      'no answer although bridge ds-embedded is online: see its log (upstream, budgets, rate limits)',
    ]);
    expect(h.upstream.requests).toHaveLength(0);
  });

  it('nothing listens: the run stops at once, naming host:port', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const run = await deviceSim(['--url', `mqtt://127.0.0.1:${port}`, '--devices', '1', '--duration', '1']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(new RegExp(`device sim-1: connection refused by 127\\.0\\.0\\.1:${port}: nothing listens there`));
  });
});
