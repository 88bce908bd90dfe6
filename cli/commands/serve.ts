import { Flags } from '@oclif/core';
import { loadConfig } from '../../shared/config.ts';
import { BaseCommand } from '../base.ts';

export default class ServeCommand extends BaseCommand<typeof ServeCommand> {
  static override summary = 'Run the API server.';
  static override description =
    'Configuration comes from the environment (PORT, HOST, DATABASE_URL, PLATFORM_SECRET_KEY, …); the flags override PORT and HOST. SIGTERM or SIGINT shuts down gracefully (a second signal exits at once).';
  static override examples = ['<%= config.bin %> serve', '<%= config.bin %> serve --port 8080 --host 0.0.0.0 --no-migrate'];
  static override flags = {
    port: Flags.integer({ summary: 'Port to listen on (overrides PORT; 0 picks a free one).', min: 0, max: 65535 }),
    host: Flags.string({ summary: 'Address to listen on (overrides HOST).' }),
    migrate: Flags.boolean({ summary: 'Apply pending platform migrations at start.', default: true, allowNo: true }),
  };

  /** serve drains on SIGINT itself (below). */
  protected override interruption(): undefined {
    return undefined;
  }

  async run() {
    const config = loadConfig();
    if (this.flags.port !== undefined) config.port = this.flags.port;
    if (this.flags.host !== undefined) config.host = this.flags.host;
    const { PortInUseError, startServer } = await import('../../server/main.ts');
    const handle = await startServer(config, { migrate: this.flags.migrate }).catch((err: unknown) => {
      if (!(err instanceof PortInUseError)) throw err;
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    });
    // A person at a terminal gets one line; the JSON log is for machines.
    if (process.stderr.isTTY) process.stderr.write(`Platform ready at ${handle.url} — API docs at /api/docs/\n`);
    const code = await new Promise<number>((resolve) => {
      let stopping = false;
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) process.exit(1); // second signal: no more waiting
        stopping = true;
        handle.log.info({ signal }, 'shutting down');
        handle.close().then(
          () => resolve(0),
          (err: unknown) => {
            this.info(`Error: shutdown failed: ${(err as Error).message}`);
            resolve(1);
          },
        );
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    });
    process.exit(code);
  }
}
