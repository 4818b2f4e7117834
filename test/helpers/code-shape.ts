// Sizes a newcomer feels: lines per file, lines per function. Read with the TypeScript
// compiler's parser, so a function is what the language says it is (declarations, methods,
// constructors, accessors, arrow functions and function expressions).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

export const MAX_FILE_LINES = 400;
export const MAX_FUNCTION_LINES = 80;
/** A comment directly above a longer function that says why it is long: `// Long: <reason>`. */
const LONG_REASON = /\/\/\s*Long:\s*\S/;

export interface Sized {
  file: string;
  name: string;
  lines: number;
}

export function sourceFiles(root: string, folders: string[]): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (name === 'node_modules') return [];
      if (statSync(path).isDirectory()) return walk(path);
      return path.endsWith('.ts') ? [path] : [];
    });
  return folders.flatMap((folder) => walk(join(root, folder)));
}

/** The project's top-level source folders: every folder holding TypeScript, tests and build output aside. */
export function sourceFolders(root: string): string[] {
  const skip = new Set(['node_modules', 'dist', 'test']);
  return readdirSync(root)
    .filter((name) => !name.startsWith('.') && !skip.has(name) && statSync(join(root, name)).isDirectory())
    .filter((name) => sourceFiles(root, [name]).length > 0)
    .sort();
}

export function lineCount(path: string): number {
  const text = readFileSync(path, 'utf8');
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

function nameOf(node: ts.Node, source: ts.SourceFile): string {
  const named = node as { name?: ts.Node };
  if (named.name) return named.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(source);
  }
  if (ts.isCallExpression(parent)) return `(argument of ${parent.expression.getText(source).slice(0, 40)})`;
  return '(anonymous)';
}

/** Whether the statement that holds the function carries a `// Long:` comment. */
function hasReason(node: ts.Node, text: string): boolean {
  let holder: ts.Node = node;
  while (holder.parent && !ts.isSourceFile(holder.parent) && !ts.isBlock(holder.parent) && !ts.isClassLike(holder.parent)) {
    holder = holder.parent;
  }
  const comments = ts.getLeadingCommentRanges(text, holder.getFullStart()) ?? [];
  return comments.some((c) => LONG_REASON.test(text.slice(c.pos, c.end)));
}

/** Every function longer than `max` lines without a `// Long:` reason beside it. */
export function longFunctions(paths: string[], root: string, max = MAX_FUNCTION_LINES): Sized[] {
  const found: Sized[] = [];
  for (const path of paths) {
    const text = readFileSync(path, 'utf8');
    const source = ts.createSourceFile(path, text, ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const lines = end - start + 1;
        if (lines > max && !hasReason(node, text)) found.push({ file: relative(root, path), name: nameOf(node, source), lines });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found.sort((a, b) => b.lines - a.lines);
}
