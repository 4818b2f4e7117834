// CONFIG_FILE's text: YAML (.yaml, .yml; comments allowed) or JSON, read into plain data, with
// the line and column of any value by its path, so a problem names where to look.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Document } from 'yaml';

// Loaded when a CONFIG_FILE is read, not by every start.
let loaded: typeof import('yaml') | undefined;
const yaml = (): typeof import('yaml') => (loaded ??= createRequire(import.meta.url)('yaml') as typeof import('yaml'));

export type FileFormat = 'yaml' | 'json';

/** Where a value (or with `key`, its key) is in the file: "path:line:col", or only "path" when it cannot be placed. */
export type Locate = (path: readonly PropertyKey[], key?: boolean) => string;

export type ReadResult = { data: unknown; format: FileFormat; locate: Locate } | { problem: string };

export const formatOf = (path: string): FileFormat => (/\.ya?ml$/i.test(path) ? 'yaml' : 'json');

/** The file's data, or one problem naming the place of a syntax error. */
export function readConfigText(path: string): ReadResult {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { problem: `${path}: cannot be read: ${err instanceof Error ? err.message : String(err)}` };
  }
  const format = formatOf(path);
  const { LineCounter, parseDocument } = yaml();
  const lines = new LineCounter();
  // merge: `<<: *anchor` shares a block between templates or providers.
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, merge: true });
  const at = (offset: number): string => {
    const { line, col } = lines.linePos(offset);
    return `${path}:${line}:${col}`;
  };
  const locate: Locate = (p, key = false) => {
    const offset = offsetOf(doc, p, key);
    return offset === undefined ? path : at(offset);
  };
  if (format === 'json') return readJson(path, text, doc, at, locate);
  const error = doc.errors[0];
  if (error !== undefined) return { problem: `${at(error.pos[0])}: not valid YAML: ${error.message}` };
  // A file of comments only is an empty configuration.
  return { data: doc.toJS({ maxAliasCount: 1000 }) ?? {}, format, locate };
}

/** JSON as JSON.parse reads it (as before YAML was accepted); YAML's reading only places values. */
function readJson(path: string, text: string, doc: Document, at: (offset: number) => string, locate: Locate): ReadResult {
  try {
    return { data: JSON.parse(text) as unknown, format: 'json', locate };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const position = /at position (\d+)/.exec(message)?.[1] ?? doc.errors[0]?.pos[0];
    const where = position === undefined ? path : at(Number(position));
    const short = message.replace(/, ".*" is not valid JSON$/s, '').replace(/ in JSON at position \d+.*$/s, '');
    return { problem: `${where}: not valid JSON: ${short}` };
  }
}

/** The start of the deepest node along `path` that the file has: its value (or `key`: the last one's key). */
function offsetOf(doc: Document, path: readonly PropertyKey[], key: boolean): number | undefined {
  const { isAlias, isMap, isScalar, isSeq } = yaml();
  let node: unknown = doc.contents;
  let offset: number | undefined;
  for (const [i, segment] of path.entries()) {
    if (isAlias(node)) node = node.resolve(doc);
    let next: unknown;
    if (isMap(node)) {
      const pair = node.items.find((p) => String(isScalar(p.key) ? p.key.value : p.key) === String(segment));
      next = key && i === path.length - 1 ? pair?.key : (pair?.value ?? pair?.key);
    } else if (isSeq(node)) next = node.items[Number(segment)];
    const range = (next as { range?: [number, number, number] } | undefined)?.range;
    if (range === undefined) break;
    node = next;
    offset = range[0];
  }
  return offset;
}
