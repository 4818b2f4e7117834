// `edge-ai-bridge hash-password`: reads a password from stdin (all of it, minus one trailing
// newline) and prints the `scrypt$N$r$p$salt$hash` line an AUTH_FILE user needs.
import { hashPassword } from '../../../broker/auth.js';

export async function runHashPassword(): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  let password = Buffer.concat(chunks).toString('utf8');
  if (password.endsWith('\r\n')) password = password.slice(0, -2);
  else if (password.endsWith('\n')) password = password.slice(0, -1);
  if (password.length === 0) {
    process.stderr.write('edge-ai-bridge: hash-password: no password on stdin (e.g. `printf %s "$PW" | npm run -s edge-ai-bridge -- hash-password`)\n');
    process.exit(2);
  }
  process.stdout.write(`${await hashPassword(password)}\n`);
}
