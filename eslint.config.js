// ESLint: JavaScript's and typescript-eslint's recommended rules, with type information (the
// promise rules: an async function handed where nothing awaits it, an await of a non-promise).
// No layout rules: Prettier lays the code out (.prettierrc), so the two never disagree.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  globalIgnores(['dist/', 'data/', 'outbox/', 'test/fixtures/', 'test/contract/']),
  {
    files: ['**/*.{ts,tsx,js,mjs}'],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      globals: globals.node,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Mail is checked for control characters (header injection, NUL in addresses): such a
      // regular expression is the point, not a mistake.
      'no-control-regex': 'off',
      // An async function without await is how a fake or a simple implementation fulfils a
      // promise-returning interface (and its throw becomes a rejection).
      '@typescript-eslint/require-await': 'off',
      // A leading underscore marks a name left unused on purpose (a field dropped by destructuring).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      // Outcomes and events are closed unions handled by exhaustive switches.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    // The daemon logs through its logger and the CLI writes through its output functions.
    files: ['src/**'],
    rules: { 'no-console': 'error' },
  },
  {
    files: ['test/**'],
    rules: {
      // Tests read JSON responses as `any` and check their shape with chai.
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // chai's property assertions (`.to.be.empty`, `.and.not.NaN`) are expressions.
      '@typescript-eslint/no-unused-expressions': 'off',
      // Tests compare methods by identity and hand fakes' functions around.
      '@typescript-eslint/unbound-method': 'off',
    },
  },
  {
    // The dashboard's browser code (bundled by esbuild, type-checked by its own tsconfig.json).
    files: ['src/dashboard/web/**'],
    languageOptions: { globals: globals.browser },
  },
  {
    // Plain JavaScript (the launcher, the loader hooks, this file) is outside tsconfig.json.
    files: ['**/*.{js,mjs}'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
