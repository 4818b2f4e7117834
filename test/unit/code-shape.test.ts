// What a newcomer reads must fit in the head: no file over MAX_FILE_LINES, and no function
// over MAX_FUNCTION_LINES unless a `// Long: <reason>` comment above it says why.
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { lineCount, longFunctions, MAX_FILE_LINES, sourceFiles, sourceFolders } from '../helpers/code-shape.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SOURCE = sourceFolders(ROOT);

describe('code shape', () => {
  it(`keeps every source and test file under ${MAX_FILE_LINES} lines`, () => {
    const long = sourceFiles(ROOT, [...SOURCE, 'test'])
      .map((path) => ({ file: relative(ROOT, path), lines: lineCount(path) }))
      .filter((f) => f.lines > MAX_FILE_LINES);
    expect(long).toEqual([]);
  });

  it('keeps every source function short, or says beside it why not', () => {
    expect(longFunctions(sourceFiles(ROOT, SOURCE), ROOT)).toEqual([]);
  });

  it('finds long functions and arrow functions, and accepts the reason written beside a function or a method', () => {
    const fixture = resolve(ROOT, 'test/helpers/fixtures/code-shape');
    const found = longFunctions(sourceFiles(fixture, ['.']), fixture).map((f) => f.name);
    expect(found.sort()).toEqual(['tooLong', 'tooLongArrow']);
  });
});
