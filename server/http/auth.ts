// Bearer authentication, as a step of every route's pipeline (see registry.ts).
import { authenticateAccess } from '../../shared/auth/auth.service.ts';
import type { TokenSettings } from '../../shared/auth/tokens.ts';
import { DomainError, invalidToken } from '../../shared/errors.ts';
import type { RouteDef } from './registry.ts';
import type { AppContext } from './types.ts';

export function bearerAuthentication(settings: TokenSettings) {
  return async (ctx: AppContext, def: RouteDef) => {
    const header = ctx.get('Authorization');
    if (!header) return;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    try {
      if (!match) throw invalidToken('Authorization header must be "Bearer <token>".');
      ctx.state.actor = await authenticateAccess(ctx.state.em, settings, match[1], ctx.state.tenant);
    } catch (err) {
      // A stale or foreign token on a public route (logging in again, say) is ignored.
      if (def.auth === 'public' && err instanceof DomainError && err.status === 401) return;
      throw err;
    }
  };
}
