// The platform server as the benches run it: startServer(loadConfig()) from the environment
// they pass (DATABASE_URL, PORT, secret, admin, rate limits off, LOG_LEVEL=warn), closed in
// order on SIGTERM/SIGINT; kept here so the benches do not depend on the CLI. With
// BENCH_PROBE=1 (`npm run bench:tenancy`) it also serves a public probe on every host (scope
// 'both') that does no work of its own, so that a request on a site host and one on the
// platform host differ only by host routing.
import { startServer } from '../server/main.ts';
import type { RouteDef } from '../server/http/registry.ts';
import { loadConfig } from '../shared/config.ts';

const probe: RouteDef = {
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
};

const handle = await startServer(loadConfig(), {
  announce: () => undefined,
  extraRoutes: process.env.BENCH_PROBE === '1' ? [probe] : [],
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
