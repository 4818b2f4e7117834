// The kept lint: ESLint's and typescript-eslint's recommended rules (syntax only, no type
// information: the compiler already checks types, and a type-aware lint would cost the
// 2-core machine a second compile on every `npm test`), plus two house rules the compiler
// cannot state: no import cycle between files, and type-only imports written as such.
// Formatting is Prettier's (.prettierrc.json), not ESLint's.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import { importX } from 'eslint-plugin-import-x';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/', 'coverage/', 'clients/python/', '.scratch/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: 'tsconfig.json' })],
    },
    rules: {
      // `typeof import('x')` stays allowed: the type of a CommonJS module loaded with require.
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
      // `const { field: _field, ...rest } = x` drops a field: the house way to copy without it.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // A variable a closure reads before its one assignment cannot be const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Input is checked for control characters on purpose (names, tags, terminal output).
      'no-control-regex': 'off',
    },
  },
  {
    // The dashboard's page: browser modules, served as they are.
    files: ['bridge/ops/dashboard/static/**/*.js'],
    languageOptions: { globals: globals.browser },
  },
  {
    files: ['eslint.config.js'],
    languageOptions: { globals: globals.node },
  },
);
