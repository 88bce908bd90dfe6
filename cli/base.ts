// The base of every command: `--json`, parsing, error handling; and, for commands that work on
// the platform, the API client with its transport (`--api-url` remote, or `--direct`).
//
// Output contract: a command returns the API's JSON body for its operation; with --json it
// is printed as is (oclif's enableJsonFlag), otherwise the command prints readable text with
// this.log(). A failure is `Error: …` on stderr (then a line per field message), or the error
// body with --json, and exit code 1 (oclif's own usage errors keep oclif's message and exit
// code 2). Progress and notices go to stderr.
//
// Keep this module and the command modules light: every start imports them (cli/commands.ts);
// the transports, hence the server, the ORM and pg, are imported when a command runs.
import fs from 'node:fs';
import { Args, Command, Errors, Flags, type Interfaces } from '@oclif/core';
import { ConfigError, loadConfig, type Config } from '../shared/config.ts';
import type { Database } from '../shared/db/database.ts';
import { DomainError } from '../shared/errors.ts';
import { Api, defined, segment, type ApiRequest, type QueryValue } from './api.ts';
import { jsonObject, parseJson, siteFlag } from './flags.ts';
import { errorText, keyValues } from './output.ts';

export type FlagsOf<T extends typeof Command> = Interfaces.InferredFlags<T['baseFlags'] & T['flags']>;
export type ArgsOf<T extends typeof Command> = Interfaces.InferredArgs<T['args']>;

/** A secret handed over by the name of the environment variable that holds it (`--…-env VAR`): its value, undefined without the flag; 400 when the variable is unset. */
export function secretFromEnv(flag: string, envName: string | undefined): string | undefined {
  if (envName === undefined) return undefined;
  const value = process.env[envName];
  if (!value) throw new DomainError('BAD_REQUEST', `The environment variable ${envName} (--${flag}) is not set.`);
  return value;
}

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

export const profileFlag = Flags.string({
  summary: 'The stored connection to use: its API URL and logins (`platform login --profile`). Default: "default".',
  env: 'PLATFORM_PROFILE',
  helpGroup: 'GLOBAL',
});

/** The remote connection of a command: the profile's logins, and the API URL given, else the one the profile remembers. */
export async function connection(flags: { 'api-url'?: string; profile?: string }, hint?: string) {
  const { CredentialStore } = await import('./credentials.ts');
  const { RemoteTransport } = await import('./remote.ts');
  const store = new CredentialStore(flags.profile);
  return { store, remote: new RemoteTransport(flags['api-url'] ?? store.apiUrl(), store, hint) };
}

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
    if (this.interruption() !== undefined) process.once('SIGINT', this.onInterrupt);
  }

  /**
   * What a Ctrl-C leaves behind, for the line `interrupted: …` (exit 130); undefined: the command
   * handles SIGINT itself (serve). Commands that change things in steps say which steps stay.
   */
  protected interruption(): string | undefined {
    return 'nothing was changed';
  }

  private readonly onInterrupt = () => {
    const message = `interrupted: ${this.interruption()}`;
    if (this.jsonEnabled()) this.logJson(new DomainError('INTERRUPTED', message).toBody());
    else process.stderr.write(`\n${message}\n`);
    process.exit(130);
  };

  protected override async finally(err: Error | undefined): Promise<void> {
    process.off('SIGINT', this.onInterrupt);
    await super.finally(err);
  }

  /** `work` on the configuration's database (DATABASE_URL, else the embedded PostgreSQL, stopped afterwards if this process started it): the operator commands that need no API. */
  protected async withDatabase<T>(work: (db: Database, config: Config) => Promise<T>): Promise<T> {
    const config = loadConfig();
    const { openCommandDatabase } = await import('../shared/db/database.ts'); // here, not at the top: only these commands load the ORM
    const db = await openCommandDatabase(config, (line) => this.info(line));
    try {
      return await work(db, config);
    } finally {
      await db.close();
    }
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
    else process.stderr.write(`${errorText(domain)}\n`);
    if (process.env.PLATFORM_DEBUG && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
    return undefined;
  }
}

/** Commands that call the API: remote (the API URL and the stored login) or --direct (in process). */
export abstract class ApiCommand<T extends typeof Command> extends BaseCommand<T> {
  static override baseFlags = {
    'api-url': apiUrlFlag,
    profile: profileFlag,
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
    const flags = this.flags as { direct?: boolean; as?: string; 'api-url'?: string; profile?: string };
    if (flags.direct) {
      const { DirectTransport } = await import('./direct.ts');
      this.client = new Api(new DirectTransport(loadConfig(), flags.as, (line) => this.info(line)));
    } else {
      this.client = new Api((await connection(flags)).remote);
    }
    return this.client;
  }

  /** One request answered with JSON. */
  protected async call<B>(req: ApiRequest): Promise<B> {
    return (await this.api()).call<B>(req);
  }

  protected override interruption(): string {
    const applied = this.client?.applied ?? [];
    const listed = applied.length > 3 ? `${applied.slice(0, 3).join(', ')} and ${applied.length - 3} more` : applied.join(', ');
    const before = applied.length ? `${applied.length} change${applied.length === 1 ? ' was' : 's were'} made before (${listed})` : '';
    const inFlight = this.client?.inFlight;
    if (inFlight) return `${inFlight} had no answer yet: it may have been applied, check before retrying${before ? `; ${before}` : ''}`;
    return before ? `${before}; nothing after` : 'nothing was changed';
  }

  protected override async finally(err: Error | undefined): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.transport.close();
    await super.finally(err);
  }
}

type OperationInput<F extends Interfaces.FlagInput, A extends Interfaces.ArgInput> = {
  // `any`: the flags api() derives from the route are known at run time only
  flags: Interfaces.InferredFlags<F & typeof ApiCommand.baseFlags> & Record<string, any>;
  args: Interfaces.InferredArgs<A> & Record<string, any>;
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

/**
 * One command for a pair of operations, the platform's and a site's (`user list` and `user list
 * --site S`): `--site` picks the site's. Each keeps its own request and rendering; the flags are
 * the union, and a flag that only the other operation has is refused by name.
 */
export function bySite(platform: ReturnType<typeof operation>, site: ReturnType<typeof operation>, noun: string) {
  const { site: _site, ...siteFlags } = site.flags as Interfaces.FlagInput;
  const help = `With --site, a site's own ${noun}.`;
  const siteHelp = `The site whose own ${noun} to work on (its schema name); without it, the platform's.`;
  return class extends ApiCommand<typeof Command> {
    static override summary = `${platform.summary!.replace(/\.?$/, '.')} ${help}`;
    static override description = platform.description;
    static override examples = [...(platform.examples as string[]), ...(site.examples as string[])];
    static override flags = { ...siteFlags, ...platform.flags, site: Flags.string({ summary: `${siteHelp} ${siteFlag.summary!.replace(/^The site \(its schema name\)\. /, '')}` }) };
    static override args = platform.args;

    async run(): Promise<unknown> {
      const flags = this.flags as Record<string, unknown>;
      const chosen = flags.site === undefined ? platform : site;
      const other = chosen === platform ? `a site's ${noun} (--site)` : `the platform's ${noun} (without --site)`;
      for (const name of Object.keys(flags)) {
        if (flags[name] !== undefined && !(name in chosen.flags) && !(name in ApiCommand.baseFlags) && name !== 'json') {
          throw new DomainError('BAD_REQUEST', `--${name} applies to ${other} only.`);
        }
      }
      return chosen.prototype.run.call(this);
    }
  };
}

// ---- commands generated from the route registry ------------------------------------------

/** How a field is written on the command line (scripts/manifest.ts derives it from the route's schema). */
type Kind = 'string' | 'number' | 'boolean' | 'strings' | 'numbers' | 'object' | 'json';
interface Field {
  kind: Kind;
  help?: string;
  required?: true;
}
interface Operation {
  method: ApiRequest['method'];
  path: string;
  /** A site's route: `--site` names the site. */
  site?: true;
  summary: string;
  description?: string;
  params?: Record<string, Field>;
  query?: Record<string, Field>;
  body?: Record<string, Field>;
}

/** Every API operation by operationId, as the route registry declares it (operations.json, `npm run manifest`). */
const OPERATIONS: Record<string, Operation> = JSON.parse(fs.readFileSync(new URL('../operations.json', import.meta.url), 'utf8'));

const number = (v: string): number | string => (/^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v); // anything else: the API refuses it by field

export interface ApiSpec<F extends Interfaces.FlagInput, A extends Interfaces.ArgInput, B> extends Omit<OperationSpec<F, A, B>, 'summary' | 'request' | 'args'> {
  /** Instead of the route's summary. */
  summary?: string;
  /** Fields given as positional arguments, in order (path parameters or body fields). */
  args?: string[];
  /** Field → its flag's name where the convention (snake_case → kebab-case, a path's `app_slug` → `--app`, a body's `is_x` → `--x/--no-x`) does not fit; false: no flag. */
  rename?: Record<string, string | false>;
  /** Field → its help where the route's does not fit the command (`policy get ID`: one id of the list's filter). */
  help?: Record<string, string>;
  /** Fields the command computes from its own flags (they replace the fields' flags); on a route whose body is not described field by field (records, edges, policies), the whole body. */
  body?: (input: OperationInput<F, A>) => unknown;
  query?: (input: OperationInput<F, A>) => Record<string, QueryValue>;
  /** A progress line on stderr before the request. */
  progress?: (input: OperationInput<F, A>) => string;
  /** Another path than the route's (a related route chosen by a flag: `site list --org`). */
  path?: (input: OperationInput<F, A>) => string | undefined;
}

/**
 * The command of one API operation, described by its route: its flags are the route's path
 * parameters, query and body fields (with their descriptions), its request is built from
 * them, its help is the route's. The spec only says what the route cannot: positional
 * arguments, examples, computed fields, how a person reads the answer.
 */
export function api<F extends Interfaces.FlagInput = {}, A extends Interfaces.ArgInput = {}, B = unknown>(operationId: string, spec: ApiSpec<F, A, B> = {}) {
  const op = OPERATIONS[operationId];
  if (!op) throw new Error(`No API operation ${operationId}: run \`npm run manifest\`.`);
  const positional = spec.args ?? [];
  const computed = new Set(Object.keys(spec.flags ?? {}));
  const flagOf = (field: string, kind: Kind, where: string) => {
    const conventional = where === 'params' ? field.replace(/_slug$/, '') : where === 'body' && kind === 'boolean' ? field.replace(/^is_/, '') : field;
    const name = spec.rename?.[field] ?? conventional;
    return name === false ? undefined : name.replace(/_+/g, '-');
  };
  const args: Interfaces.ArgInput = {};
  const flags: Interfaces.FlagInput = op.site ? { site: siteFlag } : {};
  const inputs: { field: string; where: 'params' | 'query' | 'body'; kind: Kind; flag?: string }[] = [];
  for (const where of ['params', 'query', 'body'] as const) {
    for (const [field, { kind, help: described, required }] of Object.entries(op[where] ?? {})) {
      const help = spec.help?.[field] ?? described;
      if (positional.includes(field) && !(field in args)) {
        args[field] = Args.string({ description: help, required: true });
        inputs.push({ field, where, kind });
        continue;
      }
      const flag = flagOf(field, kind, where);
      if (flag === undefined) continue;
      inputs.push({ field, where, kind, flag });
      if (computed.has(flag)) continue;
      const options = { summary: help, required: where === 'params' || required === true };
      flags[flag] = kind === 'boolean' && where === 'body' ? Flags.boolean({ summary: help, allowNo: true }) : kind === 'strings' || kind === 'numbers' ? Flags.string({ ...options, multiple: true, multipleNonGreedy: true }) : Flags.string(options);
    }
  }
  Object.assign(flags, spec.flags);
  return operation<F, A, B>({
    ...spec,
    summary: spec.summary ?? op.summary,
    description: spec.description ?? op.description,
    args: args as unknown as A,
    flags: flags as F,
    request: async (input) => {
      const whole = await spec.body?.(input);
      // The command's own fields first; the flags fill in the others.
      const query: Record<string, QueryValue> = { ...spec.query?.(input) };
      const fields: Record<string, unknown> = { ...(op.body && (whole as Record<string, unknown> | undefined)) };
      for (const { field, where, kind, flag } of inputs) {
        if (where === 'params') continue; // below, in the path
        const raw = flag === undefined ? input.args[field] : input.flags[flag];
        if (raw === undefined || field in (where === 'query' ? query : fields)) continue;
        if (where === 'query') query[field] = raw;
        else if (kind === 'number') fields[field] = number(raw);
        else if (kind === 'numbers') fields[field] = (raw as string[]).map(number);
        else if (kind === 'json') fields[field] = parseJson(raw, flag ?? field);
        else if (kind === 'object') fields[field] = jsonObject(raw, flag ?? field, field);
        else fields[field] = raw;
      }
      const body = defined(fields);
      if ((op.method === 'PATCH' || op.method === 'PUT') && op.body && !Object.keys(body).length) {
        const given = new Set([...inputs.filter((i) => i.where === 'body' && i.flag).map((i) => i.flag), ...computed]);
        throw new DomainError('BAD_REQUEST', `Nothing to change: give ${[...given].map((f) => `--${f}`).join(', ')}.`);
      }
      const line = spec.progress?.(input);
      if (line) input.info(line);
      return {
        method: op.method,
        site: op.site ? input.flags.site : undefined,
        path: spec.path?.(input) ?? op.path.replace(/([:*])(\w+)/g, (_, sigil: string, name: string) => {
          const value = String(input.args[name] ?? input.flags[flagOf(name, 'string', 'params')!]);
          return sigil === '*' ? value.split('/').map(segment).join('/') : segment(value);
        }),
        query,
        body: op.body ? body : whole,
      };
    },
  });
}
