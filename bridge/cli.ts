#!/usr/bin/env node
// `edge-ai-bridge [command]` (`npm run edge-ai-bridge -- …` in a clone): the command around the service
// (help: bridge/ops/cli/help.ts).
import { COMMANDS_USAGE, helpText } from './ops/cli/help.js';
import { VERSION } from './version.js';

const command = process.argv[2] ?? 'start';
const args = process.argv.slice(3);
switch (command) {
  case 'start':
    await import('./main.js');
    break;
  case 'check': {
    const { runCheck } = await import('./ops/cli/check.js');
    runCheck();
    break;
  }
  case 'config': {
    const { runConfig } = await import('./ops/cli/config.js');
    runConfig(args);
    break;
  }
  case 'health': {
    const { runHealth } = await import('./ops/cli/health.js');
    await runHealth(args);
    break;
  }
  case 'dlq': {
    const { runDlq } = await import('./ops/cli/store-commands.js');
    await runDlq(args);
    break;
  }
  case 'usage': {
    const { runUsage } = await import('./ops/cli/store-commands.js');
    await runUsage(args);
    break;
  }
  case 'budgets': {
    const { runBudgets } = await import('./ops/cli/store-commands.js');
    await runBudgets(args);
    break;
  }
  case 'hash-password': {
    const { runHashPassword } = await import('./ops/cli/hash-password.js');
    await runHashPassword();
    break;
  }
  case 'version':
  case '--version':
    process.stdout.write(`${VERSION}\n`);
    break;
  case 'help':
  case '--help':
  case '-h':
    process.stdout.write(helpText());
    break;
  default:
    process.stderr.write(`edge-ai-bridge: unknown command "${command}"\n${COMMANDS_USAGE}\n`);
    process.exit(2);
}
