// The platform server for `npm run bench:tenancy`: startServer(loadConfig()) with one extra
// route, a public probe served on every host (scope 'both') that does no work of its own, so
// that a request on a site host and one on the platform host differ only by host routing.
import { startServer } from '../server/main.ts';
import { loadConfig } from '../shared/config.ts';

const handle = await startServer(loadConfig(), {
  announce: () => undefined,
  extraRoutes: [
    {
      method: 'get',
      path: '/api/bench/probe/',
      operationId: 'bench_probe',
      summary: 'Benchmark probe',
      tags: ['bench'],
      auth: 'public',
      scope: 'both',
      responses: { 200: null },
      handler(ctx) {
        ctx.body = { tenant: ctx.state.tenant };
      },
    },
  ],
});
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  handle.close().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
