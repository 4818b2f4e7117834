// device-sim's per-device logins: the password file's two forms, its refusals (each naming
// the line), and the command-line options that choose each device's user name.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from '../../contract/index.js';
import { loginOf, parsePasswordFile } from '../../device-sim/credentials.js';
import { parseFleetArgs } from '../../device-sim/fleet.js';
import { tempDir } from '../helpers/security.js';

const dir = tempDir('device-sim-pw-');
afterAll(() => dir.remove());

function file(text: string): string {
  const path = join(dir.path, `pw-${Math.random().toString(36).slice(2)}`);
  writeFileSync(path, text);
  return path;
}

const refusal = (text: string): string => {
  try {
    parsePasswordFile('pw.txt', text);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error('accepted');
};

describe('--password-file', () => {
  it('reads user:password lines (split at the first colon), skipping blank lines, comments and CRs', () => {
    const pw = parsePasswordFile('pw.txt', '# fleet\r\ncam-1:secret\r\n\ncam-2:a:b:c\n');
    expect([...pw.byUser]).toEqual([
      ['cam-1', 'secret'],
      ['cam-2', 'a:b:c'],
    ]);
    expect(loginOf({ username: '{id}', passwordFile: pw }, 'cam-2')).toEqual({ username: 'cam-2', password: 'a:b:c' });
  });

  it('one line without a colon is the password of every device', () => {
    const pw = parsePasswordFile('pw.txt', '# shared\nhunter2\n');
    expect(loginOf({ username: 'line-{id}', passwordFile: pw }, 'cam-9')).toEqual({ username: 'line-cam-9', password: 'hunter2' });
  });

  it('refuses a bad file, naming the file and the line', () => {
    expect(refusal('cam-1:a\njust-a-password\n')).toBe(
      '--password-file pw.txt line 2: not user:password (a file of one password for every device holds that one line only)',
    );
    expect(refusal('# c\n:pw\n')).toBe('--password-file pw.txt line 2: no user name before ":"');
    expect(refusal('cam-1:\n')).toBe('--password-file pw.txt line 1: no password after "cam-1:"');
    expect(refusal('cam-1:a\ncam-2:b\ncam-1:c\n')).toBe('--password-file pw.txt line 3: user "cam-1" again (first on line 1)');
    expect(refusal('cam-1:$7$101$abc==$def==\n')).toMatch(/^--password-file pw\.txt line 1: the password of "cam-1" is a hash/);
    expect(refusal('# nothing\n\n')).toMatch(/^--password-file pw\.txt: no password in it/);
  });

  it('a device without a line is refused by name', () => {
    const pw = parsePasswordFile('pw.txt', 'cam-1:a\n');
    expect(() => loginOf({ username: '{id}', passwordFile: pw }, 'cam-2')).toThrow('--password-file pw.txt: no line for user "cam-2" (device cam-2)');
  });
});

describe('device-sim login options', () => {
  it('--username-from-id: each device logs in as its id; {id} in --username is the template form', () => {
    const path = file('sim-1:p1\nsim-2:p2\n');
    const args = parseFleetArgs(['--devices', '2', '--username-from-id', '--password-file', path]);
    expect([loginOf(args, 'sim-1'), loginOf(args, 'sim-2')]).toEqual([
      { username: 'sim-1', password: 'p1' },
      { username: 'sim-2', password: 'p2' },
    ]);
    const templated = parseFleetArgs(['--devices', '2', '--username', 'plant-{id}', '--password', 'pw']);
    expect(loginOf(templated, 'sim-2')).toEqual({ username: 'plant-sim-2', password: 'pw' });
  });

  it('checks every device (idle ones too) has a line before anything connects', () => {
    const path = file('sim-1:p1\nsim-2:p2\n');
    expect(() => parseFleetArgs(['--devices', '2', '--idle', '1', '--username-from-id', '--password-file', path])).toThrow(
      `--password-file ${path}: no line for user "sim-idle-1" (device sim-idle-1)`,
    );
  });

  it('refuses contradicting options, naming them', () => {
    const path = file('pw\n');
    const bad = (argv: string[]): string => {
      try {
        parseFleetArgs(argv);
      } catch (err) {
        return (err as Error).message;
      }
      return 'accepted';
    };
    expect(bad(['--username-from-id', '--username', 'x'])).toBe('--username-from-id: leave out --username (or write {id} in --username)');
    expect(bad(['--password-file', path])).toBe('--password-file: needs --username-from-id (or --username)');
    expect(bad(['--username-from-id', '--password-file', path, '--password', 'p'])).toBe('--password-file: leave out --password (the file gives it)');
    expect(bad(['--password-file', join(dir.path, 'missing')])).toMatch(/^--password-file: cannot read ".*missing": ENOENT/);
    expect(bad(['--workers', '1', '--mqtt5'])).toBe('--workers: the fast fleet speaks MQTT 3.1.1; --mqtt5 needs --workers 0');
  });
});
