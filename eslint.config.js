// ESLint flat config: @eslint/js recommended + typescript-eslint recommendedTypeChecked, tuned so
// that what remains are real problems. Formatting is Prettier's job (`npm run format`).
//
// typescript-eslint is imported from tools/lint: it needs TypeScript 6's compiler API, which
// TypeScript 7 (the project's compiler) does not have; see tools/lint/package.json.
//
// House style for promises: every promise is awaited, returned, or handed to `void` when it is
// deliberately left running (`void this.tick()`); a promise where a callback's return value is
// ignored (an EventEmitter listener, setTimeout) is a bug. Hence no-floating-promises and
// no-misused-promises stay on with their defaults.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'nestjs-distributed-cron-lint';

export default defineConfig(
  globalIgnores([
    'dist/',
    'build-check/',
    'coverage/',
    '.tmp/',
    'test/generated/',
    'bench/results/',
    '**/node_modules/',
    'examples/nest11-jest/',
  ]),
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: globals.node,
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: {
      reportUnusedDisableDirectives: 'error',
    },
    rules: {
      // `_name` marks a parameter or binding that is unused on purpose (an interface's signature).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // A `let` read by a closure written above its one assignment cannot become a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Re-rejecting an error caught as `unknown` (a timeout wrapper, a retried Redis call) is
      // fine; rejecting with a string literal or a plain object is still reported.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      // Off: the code writes `list[i]!` on purpose (ready for noUncheckedIndexedAccess), which
      // this rule would strip by the hundreds in `npm run format`.
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      // Off: the in-memory stores and test fakes implement async interfaces without awaiting,
      // and `async` there keeps a throw a rejection, as callers expect.
      '@typescript-eslint/require-await': 'off',
      // Off: error messages print values of unknown type with String(value) on purpose.
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
  {
    // Plain JavaScript (this file, scripts/*.mjs, tools/lint) is not part of a tsconfig project.
    files: ['**/*.{js,mjs,cjs}'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
