// Direct mode: the shared services in-process, on the database of loadConfig() (embedded
// PostgreSQL or DATABASE_URL). The actor is systemActor('cli'): an operator with database
// access is elevated explicitly, never by "no actor". Each call gets its own forked
// EntityManager, and results are wrapped into exactly the bodies the API returns.
import { systemActor } from '../../shared/auth/actor.ts';
import { createdBody, messageBody, type CreatedBody, type MessageBody } from '../../shared/common/envelopes.ts';
import { pageEnvelope, type PageEnvelope } from '../../shared/common/pagination.ts';
import { validate } from '../../shared/common/validation.ts';
import type { Config } from '../../shared/config.ts';
import { makeContext, type ServiceContext } from '../../shared/context.ts';
import { openDatabase, type Database } from '../../shared/db/database.ts';
import { migrationStatus } from '../../shared/db/orm.ts';
import { DomainError } from '../../shared/errors.ts';
import { USER_MESSAGES } from '../../shared/users/user.messages.ts';
import { UserRef, type UserCreate, type UserUpdate, type UserView } from '../../shared/users/user.schemas.ts';
import * as users from '../../shared/users/user.service.ts';
import { PATHS, withQuery } from './paths.ts';
import type { Backend, SystemActorView, UserListParams } from './types.ts';

export const CLI_ACTOR = systemActor('cli');

/** The base of absolute links, as the server computes it for a request to itself. */
export function directBaseUrl(config: Config): { publicUrl?: string; origin: string } {
  if (config.publicUrl) return { publicUrl: config.publicUrl, origin: config.publicUrl };
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  return { origin: `http://${host}:${config.port}` };
}

export class DirectBackend implements Backend {
  readonly mode = 'direct' as const;
  private readonly config: Config;
  private readonly info: (line: string) => void;
  private db: Promise<Database> | undefined;

  constructor(config: Config, info: (line: string) => void) {
    this.config = config;
    this.info = info;
  }

  /** Opens the database on first use and checks that its schema is current. */
  private database(): Promise<Database> {
    this.db ??= (async () => {
      const db = await openDatabase(this.config, { info: this.info, error: this.info }, { poolMax: 2 });
      try {
        const { pending } = await migrationStatus(db.orm);
        if (pending.length) {
          throw new DomainError(
            'SERVICE_UNAVAILABLE',
            `The database schema is not current (${pending.length} pending migration${pending.length === 1 ? '' : 's'}): run \`platform migrate\` first.`,
          );
        }
      } catch (err) {
        await db.close().catch(() => undefined);
        throw err;
      }
      return db;
    })();
    return this.db;
  }

  private async context(): Promise<ServiceContext> {
    const db = await this.database();
    return makeContext(db.orm.em.fork(), CLI_ACTOR);
  }

  /** The same path-parameter check the route applies before calling the service. */
  private ref(ref: string): string {
    return validate(UserRef, { user: ref }, 'query').user;
  }

  /** The absolute URL the API would have seen for this path, for pagination links. */
  private requestUrl(pathAndQuery: string): string {
    const base = directBaseUrl(this.config);
    return base.publicUrl ? new URL(pathAndQuery, base.publicUrl).toString() : `${base.origin}${pathAndQuery}`;
  }

  async whoami(): Promise<SystemActorView> {
    return { actor: 'system', name: CLI_ACTOR.name, access: 'direct database access, every permission (explicit elevation)' };
  }

  async listUsers(query: UserListParams): Promise<PageEnvelope<UserView>> {
    const page = await users.listUsers(await this.context(), { ...query });
    return pageEnvelope(page, this.requestUrl(withQuery(PATHS.users, query)));
  }

  async createUser(input: UserCreate): Promise<CreatedBody<UserView>> {
    return createdBody(USER_MESSAGES.created, await users.createUser(await this.context(), { ...input }));
  }

  async getUser(ref: string): Promise<UserView> {
    return users.getUser(await this.context(), this.ref(ref));
  }

  async updateUser(ref: string, input: UserUpdate): Promise<UserView> {
    return users.updateUser(await this.context(), this.ref(ref), { ...input });
  }

  async deleteUser(ref: string): Promise<MessageBody> {
    await users.deleteUser(await this.context(), this.ref(ref));
    return messageBody(USER_MESSAGES.deleted);
  }

  async close(): Promise<void> {
    const db = this.db;
    this.db = undefined;
    if (db) await (await db.catch(() => undefined))?.close();
  }
}
