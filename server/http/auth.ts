// Bearer authentication, as a step of every route's pipeline (see registry.ts).
import type { IncomingMessage } from 'node:http';
import type { Actor } from '../../shared/auth/actor.ts';
import { actorNamed, authenticateAccess, type UserAuth } from '../../shared/auth/auth.service.ts';
import type { CachedLookup } from '../../shared/common/cached-lookup.ts';
import type { TokenSettings } from '../../shared/auth/tokens.ts';
import { DomainError, invalidToken } from '../../shared/errors.ts';
import type { RouteDef } from './registry.ts';
import type { AppContext } from './types.ts';

/**
 * The actor of a request the CLI injects in process (direct mode): a property under this
 * symbol on the request object, which only code in this process can set — no header, token or
 * anything else a network request carries. `as`: a user named by the operator (`--as`).
 */
export const DIRECT_ACTOR = Symbol('platform.direct-actor');
export type DirectActor = { actor: Actor } | { as: string };
export type DirectRequest = IncomingMessage & { [DIRECT_ACTOR]?: DirectActor };

export function bearerAuthentication(settings: TokenSettings, users?: CachedLookup<UserAuth | null>) {
  return async (ctx: AppContext, def: RouteDef) => {
    const direct = (ctx.req as DirectRequest)[DIRECT_ACTOR];
    if (direct) {
      ctx.state.actor = 'actor' in direct ? direct.actor : await actorNamed(ctx.state.em, direct.as, ctx.state.tenant);
      return;
    }
    const header = ctx.get('Authorization');
    if (!header) return;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    try {
      if (!match) throw invalidToken('Authorization header must be "Bearer <token>".');
      const auth = await authenticateAccess(ctx.state.reads(), settings, match[1], ctx.state.tenant, users);
      ctx.state.actor = auth.actor;
      ctx.state.ability = auth.ability;
    } catch (err) {
      // A stale or foreign token on a public route (logging in again, say) is ignored.
      if (def.auth === 'public' && err instanceof DomainError && err.status === 401) return;
      throw err;
    }
  };
}
