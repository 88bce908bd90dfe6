// Tests that measure a site's latency under another site's load (functions' fairness, the
// sandbox's limits) run alone, after the rest (`npm test`: scripts/test.ts runs AVA twice): the
// load of a neighbouring test file is not theirs to absorb. TEST_ALONE=0: every file but those;
// TEST_ALONE=1: those only; unset: every file (`npx ava`).
const ALONE = ['server/test/functions-fairness.test.ts', 'shared/functions/sandbox/engine.test.ts'];
const ALL = ['shared/**/*.test.ts', 'server/**/*.test.ts', 'cli/**/*.test.ts'];

export default {
  files: process.env.TEST_ALONE === '1' ? ALONE : process.env.TEST_ALONE === '0' ? [...ALL, ...ALONE.map((f) => `!${f}`)] : ALL,
  extensions: ['ts'],
  timeout: '120s',
  concurrency: 2,
  workerThreads: false,
  environmentVariables: { LOG_LEVEL: 'silent' },
};
