// `npm run lint` (run by .ci/run). Type-aware (typescript-eslint's project service), so rules can
// ask what a value's type is. docs/architecture.md, "Guards".
import tseslint from 'typescript-eslint';
import literalPatterns from './scripts/lint/literal-patterns.js';

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'dist/**', 'bench/results/**', '.scratch/**'] },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { platform: { rules: { 'literal-patterns': literalPatterns } } },
    rules: { 'platform/literal-patterns': 'error', 'no-control-regex': 'error' },
  },
  // The one module that builds matchers from user-written patterns, on RE2 (linear time); and the
  // tests and benchmarks, whose patterns their authors write (no tenant's input reaches them).
  {
    files: ['shared/common/linear-regexp.ts', '**/*.test.ts', 'server/test/**', 'cli/test/**', 'bench/**'],
    rules: { 'platform/literal-patterns': 'off' },
  },
);
