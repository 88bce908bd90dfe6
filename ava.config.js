export default {
  files: ['shared/**/*.test.ts', 'server/**/*.test.ts', 'cli/**/*.test.ts'],
  extensions: ['ts'],
  timeout: '120s',
  concurrency: 2,
  workerThreads: false,
  environmentVariables: { LOG_LEVEL: 'silent' },
};
