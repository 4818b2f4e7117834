#!/usr/bin/env node
// `npx edge-ai-bridge [start|version|help]`: the installed command around the service.
import { OPS_USAGE } from './ops/ops-cli.js';
import { VERSION } from './version.js';

const USAGE = `usage: edge-ai-bridge [start | dlq … | usage … | budgets | hash-password | version | help]
  start     run the service (the default; configured by environment variables, see README)
${OPS_USAGE}
  hash-password
            read a password from stdin, print its scrypt hash for AUTH_FILE
  version   print the version`;

const command = process.argv[2] ?? 'start';
switch (command) {
  case 'start':
    await import('./main.js');
    break;
  case 'dlq': {
    const { runDlq } = await import('./ops/ops-cli.js');
    await runDlq(process.argv.slice(3));
    break;
  }
  case 'usage': {
    const { runUsage } = await import('./ops/ops-cli.js');
    await runUsage(process.argv.slice(3));
    break;
  }
  case 'budgets': {
    const { runBudgets } = await import('./ops/ops-cli.js');
    await runBudgets();
    break;
  }
  case 'hash-password': {
    const { runHashPassword } = await import('./ops/hash-password.js');
    await runHashPassword();
    break;
  }
  case 'version':
  case '--version':
    process.stdout.write(`${VERSION}\n`);
    break;
  case 'help':
  case '--help':
    process.stdout.write(`${USAGE}\n`);
    break;
  default:
    process.stderr.write(`edge-ai-bridge: unknown command "${command}"\n${USAGE}\n`);
    process.exit(2);
}
