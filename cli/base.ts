// The base of every command: `--json`, parsing, error handling; and, for commands that work on
// the platform, the API client with its transport (`--api-url` remote, or `--direct`).
//
// Output contract: a command returns the API's JSON body for its operation; with --json it
// is printed as is (oclif's enableJsonFlag), otherwise the command prints readable text with
// this.log(). A failure is one line on stderr (`Error: …`), or the error body with --json,
// and exit code 1 (oclif's own usage errors keep oclif's message and exit code 2). Progress
// and notices go to stderr.
//
// Keep this module and the command modules light: every start imports them (cli/commands.ts);
// the transports, hence the server, the ORM and pg, are imported when a command runs.
import { Command, Errors, Flags, type Interfaces } from '@oclif/core';
import { ConfigError, loadConfig, type Config } from '../shared/config.ts';
import { DomainError } from '../shared/errors.ts';
import { Api, type ApiRequest } from './api.ts';
import { CredentialStore } from './credentials.ts';
import { errorLine, keyValues } from './output.ts';

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

/** Commands that call the API: remote (the API URL and the stored login) or --direct (in process). */
export abstract class ApiCommand<T extends typeof Command> extends BaseCommand<T> {
  static override baseFlags = {
    'api-url': apiUrlFlag,
    direct: Flags.boolean({
      summary: 'Work on the database directly (DATABASE_URL or the embedded PostgreSQL), as the system actor "cli"; no server needed.',
      helpGroup: 'GLOBAL',
    }),
    as: Flags.string({
      summary: 'With --direct: act as this user (a platform username; on a site, that site\'s username) instead of the system actor.',
      dependsOn: ['direct'],
      helpGroup: 'GLOBAL',
    }),
  };

  private client: Api | undefined;

  /** The API of this invocation; commands never ask which transport carries it. */
  protected async api(): Promise<Api> {
    if (this.client) return this.client;
    const flags = this.flags as { direct?: boolean; as?: string; 'api-url'?: string };
    if (flags.direct) {
      const { DirectTransport } = await import('./direct.ts');
      this.client = new Api(new DirectTransport(this.platformConfig(), flags.as, (line) => this.info(line)));
    } else {
      const { RemoteTransport } = await import('./remote.ts');
      this.client = new Api(new RemoteTransport(flags['api-url'] ?? '', new CredentialStore()));
    }
    return this.client;
  }

  /** One request answered with JSON. */
  protected async call<B>(req: ApiRequest): Promise<B> {
    return (await this.api()).call<B>(req);
  }

  protected override async finally(err: Error | undefined): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.transport.close();
    await super.finally(err);
  }
}

type OperationInput<F extends Interfaces.FlagInput, A extends Interfaces.ArgInput> = {
  flags: Interfaces.InferredFlags<F & typeof ApiCommand.baseFlags>;
  args: Interfaces.InferredArgs<A>;
  /** Progress and notices (stderr). */
  info: (line: string) => void;
  /** Another request before the command's own (a read it builds on). */
  call: <T>(req: ApiRequest) => Promise<T>;
};

export interface OperationSpec<F extends Interfaces.FlagInput, A extends Interfaces.ArgInput, B> {
  summary: string;
  description?: string;
  examples?: string[];
  flags?: F;
  args?: A;
  /** The request this command stands for. */
  request: (input: OperationInput<F, A>) => ApiRequest | Promise<ApiRequest>;
  /** The answer as text for a person (--json prints the body itself); without it, `readable(body)`. */
  render?: (body: B, input: OperationInput<F, A>) => string | string[] | undefined;
}

/** An answer as a person reads it: an action's message (and the object it made or changed), or the object's fields. */
function readable(body: unknown): string[] {
  if (!body || typeof body !== 'object') return [];
  const { status, message, data, ...rest } = body as Record<string, unknown>;
  if ((status ?? 'success') !== 'success' || typeof message !== 'string' || Object.keys(rest).length) return [keyValues(body as Record<string, unknown>)];
  return data && typeof data === 'object' ? [message, keyValues(data as Record<string, unknown>)] : [message];
}

/**
 * A command that is one API operation: a request from the command line, the answer rendered.
 * The body's type is the one `render` declares: `render: (page: PageEnvelope<UserView>) => …`.
 */
export function operation<F extends Interfaces.FlagInput = {}, A extends Interfaces.ArgInput = {}, B = unknown>(spec: OperationSpec<F, A, B>) {
  return class extends ApiCommand<typeof Command> {
    static override summary = spec.summary;
    static override description = spec.description;
    static override examples = (spec.examples ?? []).map((e) => `<%= config.bin %> ${e}`);
    static override flags = spec.flags ?? {};
    static override args = spec.args ?? {};

    async run(): Promise<B> {
      const input = { flags: this.flags, args: this.args, info: (line: string) => this.info(line), call: <T>(req: ApiRequest) => this.call<T>(req) } as unknown as OperationInput<F, A>;
      const body = await this.call<B>(await spec.request(input));
      const text = spec.render ? spec.render(body, input) : readable(body);
      for (const line of Array.isArray(text) ? text : text === undefined ? [] : [text]) this.log(line);
      return body;
    }
  };
}
