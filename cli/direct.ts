// The direct transport: the server's own Koa application in this process, on the database of
// the configuration (the embedded PostgreSQL or DATABASE_URL), no server running and no socket.
// Each request is injected (light-my-request) with its actor attached to the request object
// under a symbol (server/http/auth.ts: DIRECT_ACTOR): the system actor "cli" — explicit
// elevation, as an operator with database access has — or the user named with --as.
import { inject } from 'light-my-request';
import pino from 'pino';
import { systemActor } from '../shared/auth/actor.ts';
import { tokenSettings } from '../shared/auth/tokens.ts';
import { createLogger } from '../shared/common/logger.ts';
import type { Config } from '../shared/config.ts';
import { openCommandDatabase, type Database } from '../shared/db/database.ts';
import { pendingPlatformMigrations } from '../shared/db/orm.ts';
import { recordedPublicUrl } from '../shared/db/platform-settings.ts';
import { DomainError } from '../shared/errors.ts';
import { createMailer } from '../shared/mail/mailer.ts';
import { HostResolver } from '../shared/tenancy/host-resolver.ts';
import { createApp, functionRuntime } from '../server/app.ts';
import type { FunctionRuntime } from '../shared/functions/runtime.ts';
import { SecretKeyring } from '../shared/secrets/crypto.ts';
import { storeFromConfig, type ObjectStore } from '../shared/storage/objstore/index.ts';
import { DIRECT_ACTOR, type DirectActor, type DirectRequest } from '../server/http/auth.ts';
import { outgoing, response, target, type ApiRequest, type ApiResponse, type Transport } from './api.ts';

const CLI_ACTOR = systemActor('cli');

type Dispatch = (req: DirectRequest, res: import('node:http').ServerResponse) => void;

/**
 * The Host of injected requests: HOST:PORT as the server would be reached (a platform host).
 * Never the public URL's host, which a proxy may rewrite and need not be in PLATFORM_HOSTS;
 * links name the public URL anyway (the app's config).
 */
function directHost(config: Config): string {
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const name = config.platformHosts.includes(host) ? host : (config.platformHosts[0] ?? 'localhost');
  return `${name.includes(':') ? `[${name}]` : name}:${config.port}`;
}

export class DirectTransport implements Transport {
  readonly mode = 'direct' as const;
  private readonly config: Config;
  private readonly actor: DirectActor;
  private readonly info: (line: string) => void;
  private started: Promise<{ db: Database; dispatch: Dispatch; functions: FunctionRuntime; store: ObjectStore }> | undefined;

  constructor(config: Config, as: string | undefined, info: (line: string) => void) {
    this.config = config;
    this.actor = as === undefined ? { actor: CLI_ACTOR } : { as };
    this.info = info;
  }

  /** Opens the database (its schema must be current) and builds the application, on first use. */
  private start(): Promise<{ db: Database; dispatch: Dispatch; functions: FunctionRuntime; store: ObjectStore }> {
    this.started ??= (async () => {
      const db = await openCommandDatabase(this.config, this.info);
      try {
        const n = (await pendingPlatformMigrations(db.orm)).length;
        if (n) {
          throw new DomainError('SERVICE_UNAVAILABLE', `The database schema is not current (${n} pending migration${n === 1 ? '' : 's'}): run \`platform migrate\` first.`);
        }
      } catch (err) {
        await db.close().catch(() => undefined);
        throw err;
      }
      // Links name the server's public URL: this process's PLATFORM_PUBLIC_URL, else the one the server recorded.
      const publicUrl = this.config.publicUrl ?? (await recordedPublicUrl(db.orm.em.fork()));
      // Logs go to stderr (stdout is the command's output), at LOG_LEVEL, without a line per request.
      const log = createLogger(this.config.logLevel, { service: 'platform-cli', destination: pino.destination({ dest: 2, sync: true }) });
      const config = { ...this.config, publicUrl, rateLimit: { ...this.config.rateLimit, enabled: false } }; // an operator's commands are not throttled
      const tokens = tokenSettings(config);
      // Functions invoked here run here (their SDK reaches the API only through FUNCTION_API_URL); nothing else is claimed from the queue.
      const secrets = new SecretKeyring(tokens.secretKey, config.secretsKeyVersion);
      const functions = functionRuntime({ config, orm: db.orm, tokens, log }, secrets);
      const store = await storeFromConfig(config.storage, config.dataDir);
      const app = createApp({ config, orm: db.orm, log, tokens, hosts: new HostResolver(db.orm), mailer: createMailer(config, log), secrets, store, functions, logRequests: false });
      return { db, dispatch: app.callback() as Dispatch, functions, store };
    })();
    return this.started;
  }

  async send(req: ApiRequest, accept: string): Promise<ApiResponse> {
    const { dispatch } = await this.start();
    const { headers, body: payload } = outgoing(req, accept);
    headers.host = directHost(this.config);
    const actor = this.actor;
    const res = await inject(
      (request, response) => {
        (request as DirectRequest)[DIRECT_ACTOR] = actor;
        dispatch(request as DirectRequest, response as never);
      },
      { method: req.method, url: target(req), headers, payload, payloadAsStream: true },
    );
    return response(res.statusCode, res.stream(), res.headers);
  }

  async close(): Promise<void> {
    const started = this.started;
    this.started = undefined;
    const running = await started?.catch(() => undefined);
    await running?.functions.close();
    await running?.store.close();
    await running?.db.close();
  }
}
