// `edge-ai-bridge check`: what the service checks at start (the environment, CONFIG_FILE,
// AUTH_FILE), without opening a port or connecting to Redis or a broker.
import { loadAuthFile } from '../../../broker/auth.js';
import { ConfigError, type ConfigProblem } from '../../../contract/index.js';
import { fileCounts } from '../../config/config-file.js';
import { readConfiguration, type Config } from '../../config/config.js';
import { findTypos, typoMessage } from '../../config/typos.js';

export interface CheckResult {
  problems: ConfigProblem[];
  warnings: string[];
  summary?: string;
}

function problemsOf(err: unknown): ConfigProblem[] {
  if (err instanceof ConfigError) return err.problems;
  throw err;
}

export function checkEnvironment(env: NodeJS.ProcessEnv = process.env): CheckResult {
  const warnings = findTypos(env).map(typoMessage);
  const { config, problems, values } = readConfiguration(env);
  // The broker reads AUTH_FILE when it starts: a bad file would stop the start there.
  const authFile = values.AUTH_FILE;
  let users = 0;
  if (authFile !== undefined && !problems.some((p) => p.variable === 'AUTH_FILE')) {
    try {
      users = loadAuthFile(authFile).size;
    } catch (err) {
      problems.push(...problemsOf(err));
    }
  }
  if (config === undefined || problems.length > 0) return { problems, warnings };
  return { problems, warnings, summary: summaryOf(config, users) };
}

function summaryOf(config: Config, users: number): string {
  const broker = config.brokerUrl !== undefined ? `plant broker ${new URL(config.brokerUrl).host}` : `MQTT on ${config.mqttHost}:${config.mqttPort}`;
  const parts = [
    broker,
    `admin HTTP on ${config.httpHost}:${config.httpPort}`,
    config.redis === undefined ? 'store in memory' : `store Redis (${config.redisPrefix})`,
    config.upstreamUrl === undefined ? 'no UPSTREAM_URL (only npm start runs so, on the upstream simulator)' : `upstream ${new URL(config.upstreamUrl).host}`,
    config.authFile === undefined ? 'no AUTH_FILE' : `${users} AUTH_FILE users`,
    config.configFile === undefined
      ? 'no CONFIG_FILE'
      : `CONFIG_FILE ${Object.entries(fileCounts(config.file))
          .map(([part, n]) => `${n} ${part}`)
          .join(', ')}`,
    `anonymous ${config.allowAnonymous ? 'allowed' : 'refused'}`,
  ];
  return parts.join(', ');
}

/** Exit 0 with "configuration ok" and a summary, or 2 with one line per problem. */
export function runCheck(env: NodeJS.ProcessEnv = process.env): void {
  const { problems, warnings, summary } = checkEnvironment(env);
  for (const warning of warnings) process.stderr.write(`edge-ai-bridge: warning: ${warning}\n`);
  if (problems.length > 0) {
    for (const p of problems) process.stderr.write(`edge-ai-bridge: ${p.variable}: ${p.problem}\n`);
    process.exit(2);
  }
  process.stdout.write(`configuration ok\n${summary ?? ''}\n`);
}
