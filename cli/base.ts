// The base of every command: `--json`, parsing, error handling; and, for commands that work
// on the platform's data, `--api-url` / `--direct` and the choice of backend.
//
// Output contract: a command returns the API's JSON body for its operation; with --json it
// is printed as is (oclif's enableJsonFlag), otherwise the command prints readable text with
// this.log(). A failure is one line on stderr (`Error: …`), or the error body with --json,
// and exit code 1 (oclif's own usage errors keep oclif's message and exit code 2). Progress
// and notices go to stderr.
//
// Keep command modules light: without a manifest, oclif imports every command module at each
// start to list them, so the ORM and the server are imported inside run() (≈0.25 s vs 0.6 s).
import { Command, Errors, Flags, type Interfaces } from '@oclif/core';
import { ConfigError, loadConfig, type Config } from '../shared/config.ts';
import { DomainError } from '../shared/errors.ts';
import type { Backend } from './backend/types.ts';
import { CredentialStore } from './credentials.ts';
import { errorLine } from './output.ts';

export type FlagsOf<T extends typeof Command> = Interfaces.InferredFlags<T['baseFlags'] & T['flags']>;
export type ArgsOf<T extends typeof Command> = Interfaces.InferredArgs<T['args']>;

/** Any failure as a DomainError, for the one-line message and the --json error body. */
export function toDomainError(err: unknown): DomainError {
  if (err instanceof DomainError) return err;
  if (err instanceof ConfigError) return new DomainError('BAD_REQUEST', `Configuration: ${err.message}`);
  if (err instanceof Errors.CLIError) return new DomainError('BAD_REQUEST', err.message); // usage: unknown flag, missing argument
  const message = err instanceof Error ? err.message : String(err);
  return new DomainError('INTERNAL_ERROR', message || 'An internal error occurred.');
}

export const apiUrlFlag = Flags.string({
  summary: 'Base URL of the platform API (remote mode).',
  env: 'PLATFORM_API_URL',
  helpGroup: 'GLOBAL',
});

export abstract class BaseCommand<T extends typeof Command> extends Command {
  static override enableJsonFlag = true;

  protected flags!: FlagsOf<T>;
  protected args!: ArgsOf<T>;

  override async init(): Promise<void> {
    await super.init();
    const ctor = this.ctor as typeof BaseCommand;
    const { flags, args } = await this.parse({
      flags: ctor.flags,
      baseFlags: ctor.baseFlags,
      enableJsonFlag: ctor.enableJsonFlag,
      args: ctor.args,
      strict: ctor.strict,
    });
    this.flags = flags as FlagsOf<T>;
    this.args = args as ArgsOf<T>;
  }

  /** The platform configuration (a ConfigError becomes a one-line error). */
  protected platformConfig(): Config {
    return loadConfig();
  }

  /** A notice or progress line: stderr, so stdout stays the command's output. */
  protected info(line: string): void {
    process.stderr.write(`${line}\n`);
  }

  protected override logJson(json: unknown): void {
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  }

  protected override toErrorJson(err: unknown): unknown {
    return toDomainError(err).toBody();
  }

  protected override async catch(err: Errors.CLIError & { oclif?: { exit?: number } }): Promise<unknown> {
    // oclif's own errors (unknown flag, missing argument, this.exit()) keep oclif's handling:
    // usage help, exit code 2.
    const error: unknown = err;
    if (error instanceof Errors.ExitError) throw error;
    if (error instanceof Errors.CLIError) return super.catch(err);
    process.exitCode = 1;
    const domain = toDomainError(error);
    if (this.jsonEnabled()) this.logJson(domain.toBody());
    else process.stderr.write(`${errorLine(domain)}\n`);
    if (process.env.PLATFORM_DEBUG && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
    return undefined;
  }
}

/** Commands on the platform's data: remote (our HTTP API) or --direct (the database). */
export abstract class BackendCommand<T extends typeof Command> extends BaseCommand<T> {
  static override baseFlags = {
    'api-url': apiUrlFlag,
    direct: Flags.boolean({
      summary: 'Work on the database directly (DATABASE_URL or the embedded PostgreSQL) as the system actor "cli".',
      helpGroup: 'GLOBAL',
    }),
  };

  private backendInstance: Backend | undefined;

  /** The backend of this invocation; commands never ask which one it is. */
  protected async backend(): Promise<Backend> {
    if (this.backendInstance) return this.backendInstance;
    const flags = this.flags as { direct?: boolean; 'api-url'?: string };
    if (flags.direct) {
      const config = this.platformConfig();
      const { DirectBackend } = await import('./backend/direct.ts');
      this.backendInstance = new DirectBackend(config, (line) => this.info(line));
    } else {
      const { ApiClient, RemoteBackend, requireApiUrl } = await import('./backend/remote.ts');
      this.backendInstance = new RemoteBackend(new ApiClient(requireApiUrl(flags['api-url']), new CredentialStore()));
    }
    return this.backendInstance;
  }

  protected override async finally(err: Error | undefined): Promise<void> {
    const backend = this.backendInstance;
    this.backendInstance = undefined;
    await backend?.close();
    await super.finally(err);
  }
}
