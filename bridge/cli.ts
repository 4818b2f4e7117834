#!/usr/bin/env node
// `npx edge-ai-bridge [start|version|help]`: the installed command around the service.
import { VERSION } from './version.js';

const USAGE = `usage: edge-ai-bridge [start | dlq … | version | help]
  start     run the service (the default; configured by environment variables, see README)
  dlq list | replay [deviceId/id …] | purge
            the dead-letter list of the deployment on REDIS_URL (REDIS_PREFIX)
  version   print the version`;

const command = process.argv[2] ?? 'start';
switch (command) {
  case 'start':
    await import('./main.js');
    break;
  case 'dlq': {
    const { runDlq } = await import('./dlq-cli.js');
    await runDlq(process.argv.slice(3));
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
