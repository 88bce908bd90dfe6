// The platform server as the bench runs it: startServer(loadConfig()) from the environment
// the bench passes (DATABASE_URL, PORT, secret, admin, rate limits off, LOG_LEVEL=warn),
// closed in order on SIGTERM/SIGINT. Kept here so the bench does not depend on the CLI.
import { startServer } from '../server/main.ts';
import { loadConfig } from '../shared/config.ts';

const handle = await startServer(loadConfig(), { announce: () => undefined });
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
