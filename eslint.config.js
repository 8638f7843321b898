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

// One direction of imports (docs/architecture.md, "How it is built"). Folders of src/, top to
// bottom; a file may import from its own folder and from the tiers below its own, never from a
// tier above nor from another folder of its own tier. src/index.ts (the public entry) may import
// anything. The root files (interfaces, messages, limits, module options) are one tier above errors/.
const TIERS = [
  ['cli', 'dashboard', 'testing', 'observability/terminus'],
  ['nest'],
  ['schedules'],
  ['execution'],
  ['leasing', 'history', 'alerting', 'topology', 'observability'],
  ['config'],
  ['scheduling'],
  ['<root>'],
  ['errors'],
];
const ROOT_FILES = 'src/*.ts';
const folderImport = (folder) => (folder === '<root>' ? String.raw`^\.\.(/\.\.)*/[^/]+$` : `^\\.{1,2}/(\\.\\./)*${folder}/`);
/** The imports a file of `folder` may not make, as no-restricted-imports patterns. */
function forbidden(folder, except = {}) {
  const tier = TIERS.findIndex((names) => names.includes(folder));
  const patterns = [];
  TIERS.forEach((names, i) => {
    if (i > tier) return;
    for (const other of names) {
      // A folder's own subfolder is its own business (observability/terminus is a tier of its own).
      if (other === folder || (folder === '<root>' && other === '<root>')) continue;
      if (other.startsWith(`${folder}/`)) continue;
      const regex = except[other] ?? folderImport(other);
      const where = i === tier ? 'beside it in the same tier' : 'above it';
      patterns.push({
        regex,
        message: `${folder}/ must not import ${other}/, which sits ${where}: see "How it is built" in docs/architecture.md.`,
      });
    }
  });
  return patterns;
}
const layerRule = (folder, except) => ({
  '@typescript-eslint/no-restricted-imports': ['error', { patterns: forbidden(folder, except) }],
});
const layerBlocks = TIERS.flat()
  .filter((folder) => folder !== '<root>')
  .map((folder) => ({
    files: [`src/${folder}/**/*.ts`],
    ...(folder === 'observability' ? { ignores: ['src/observability/terminus/**'] } : {}),
    rules: layerRule(folder),
  }));

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
  ...layerBlocks,
  {
    files: [ROOT_FILES],
    ignores: ['src/index.ts', 'src/distributed-cron.module-options.ts'],
    rules: layerRule('<root>'),
  },
  {
    // The module's options name the ports a user may replace (stores, alerter, hooks, schedules):
    // their types only, never code.
    files: ['src/distributed-cron.module-options.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: forbidden('<root>').map((pattern) =>
            /(leasing|history|alerting|observability|schedules)\/$/.test(pattern.regex) ? { ...pattern, allowTypeImports: true } : pattern,
          ),
        },
      ],
    },
  },
  {
    // The ports are declared in leasing/lease.store.ts beside their Redis implementation: the
    // dispatcher takes its port (FailureStreaks) from there, and nothing else of leasing/.
    files: ['src/alerting/alert.dispatcher.ts'],
    rules: layerRule('alerting', { leasing: String.raw`^\.\./leasing/(?!lease\.store\.js$)` }),
  },
  {
    // The same for retention's port (JobFlags: its once-keys).
    files: ['src/history/retention.runner.ts'],
    rules: layerRule('history', { leasing: String.raw`^\.\./leasing/(?!lease\.store\.js$)` }),
  },
  {
    // Plain JavaScript (this file, scripts/*.mjs, tools/lint) is not part of a tsconfig project.
    files: ['**/*.{js,mjs,cjs}'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
