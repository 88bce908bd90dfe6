// Tests that measure a site's latency under another site's load (functions' fairness, the
// sandbox's limits, policies' evaluation budgets, change streams' fan-out) run alone, after the rest (`npm test`: scripts/test.ts runs AVA twice): the
// load of a neighbouring test file is not theirs to absorb. TEST_ALONE=0: every file but those;
// TEST_ALONE=1: those only; unset: every file (`npx ava`).
const ALONE = ['server/test/functions-fairness.test.ts', 'shared/functions/sandbox/engine.test.ts', 'server/test/policies-limits.test.ts', 'server/test/realtime-fairness.test.ts'];
const ALL = ['shared/**/*.test.ts', 'server/**/*.test.ts', 'cli/**/*.test.ts'];

// The files that take longest start first (measured, slowest first: a minute or more each, most
// of it their serial steps), then the other CLI files (each command is a process of its own),
// then the rest: started last, a long file would run on alone after the others are done.
const FIRST = [
  'cli/test/site-move', 'cli/test/storage', 'cli/test/tables', 'cli/test/data', 'cli/test/apps', 'cli/test/orgs',
  'server/test/docs-browser', 'cli/test/story', 'cli/test/roles', 'cli/test/function', 'cli/test/sites', 'cli/test/site-backup',
  'cli/test/secrets', 'cli/test/edges', 'server/test/embedded',
];
const rank = (file) => {
  const i = FIRST.findIndex((f) => file.endsWith(`${f}.test.ts`));
  return i >= 0 ? i : file.includes('/cli/') ? FIRST.length : FIRST.length + 1;
};

export default {
  files: process.env.TEST_ALONE === '1' ? ALONE : process.env.TEST_ALONE === '0' ? [...ALL, ...ALONE.map((f) => `!${f}`)] : ALL,
  extensions: ['ts'],
  timeout: '120s',
  concurrency: 2,
  workerThreads: false,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
  environmentVariables: { LOG_LEVEL: 'silent' },
};
