import type { RouterContext } from '@koa/router';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Actor, AppAbility } from '../../shared/auth/actor.ts';
import type { RequestSession } from '../../shared/auth/sessions.ts';
import type { ServiceContext } from '../../shared/context.ts';
import type { TenantRef } from '../../shared/tenancy/host-resolver.ts';
import type { RouteDef } from './registry.ts';

export interface AppState {
  requestId: string;
  /** The request's unit of work (made on first use). */
  em: EntityManager;
  /** For a plain read outside any transaction: `em` if made already, else the ORM's root (shared/context.ts). */
  reads: () => EntityManager;
  /** Set by the authentication step when valid credentials came with the request (a bearer token or a session cookie). */
  actor?: Actor;
  /** The browser session that authenticated the request, when its cookie did (auth.ts). */
  session?: RequestSession;
  /** The actor's ability, when authentication has it (cached with the user). */
  ability?: AppAbility;
  /**
   * The request's credentials checked again (auth.ts): throws once the token expired or was
   * revoked, the session ended, or the user is no longer usable. A long-lived response (a change
   * stream) calls it as it goes; from the users cache, so no query while nothing changed.
   */
  recheck?: () => Promise<void>;
  /** When the request's credentials expire (milliseconds since the epoch), when they do. */
  expires?: number;
  /** The site schema served on this host; null on the platform host. */
  tenant: string | null;
  /** The site selected by host routing (when `tenant` is set). */
  site?: TenantRef;
  route?: RouteDef;
  service: () => ServiceContext;
}

export type AppContext = RouterContext<AppState>;
