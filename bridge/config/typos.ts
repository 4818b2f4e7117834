// A misspelt variable (MQTT_PROT for MQTT_PORT) is otherwise silently ignored and its default
// used; this names the variable it resembles. Only names that look like the bridge's are
// considered, so the rest of the environment (PATH, HOME, NODE_OPTIONS…) never warns.
import { VARIABLES } from './variables.js';

export interface Typo {
  variable: string;
  resembles: string;
}

const MAX_DISTANCE = 2;
const MIN_LENGTH = 4;

/** Edits (insert, delete, substitute, swap two neighbours) between a and b: optimal string alignment. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const row = d[i] as number[];
      const above = d[i - 1] as number[];
      row[j] = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        row[j] = Math.min(row[j] as number, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

const firstWord = (name: string): string => name.split('_')[0] ?? name;
const squeezed = (name: string): string => name.replaceAll('_', '');

/** Ours: its first word is (within one edit) a known first word, or it is a known name but for underscores and one edit. */
function looksLikeOurs(name: string, known: readonly string[]): boolean {
  const word = firstWord(name);
  return known.some((k) => editDistance(word, firstWord(k)) <= 1 || editDistance(squeezed(name), squeezed(k)) <= 1);
}

/** Each environment name that is not a known variable but is within two edits of one. */
export function findTypos(env: NodeJS.ProcessEnv, known: readonly string[] = VARIABLES): Typo[] {
  const knownSet = new Set(known);
  const typos: Typo[] = [];
  for (const name of Object.keys(env)) {
    if (knownSet.has(name) || name.length < MIN_LENGTH || !/^[A-Z][A-Z0-9_]*$/.test(name)) continue;
    let best: { name: string; distance: number } | undefined;
    for (const k of known) {
      const distance = editDistance(name, k);
      if (distance <= MAX_DISTANCE && (best === undefined || distance < best.distance)) best = { name: k, distance };
    }
    if (best !== undefined && looksLikeOurs(name, known)) typos.push({ variable: name, resembles: best.name });
  }
  return typos;
}

export const typoMessage = ({ variable, resembles }: Typo): string => `${variable} is not a variable the bridge reads: did you mean ${resembles}?`;

/** The known name nearest to `name` (case aside): what an unknown CONFIG_FILE setting most likely meant. */
export function closestName(name: string, known: readonly string[] = VARIABLES): string {
  const upper = name.toUpperCase();
  let best = known[0] ?? '';
  let bestDistance = Infinity;
  for (const k of known) {
    const distance = editDistance(upper, k);
    if (distance < bestDistance) [best, bestDistance] = [k, distance];
  }
  return best;
}
