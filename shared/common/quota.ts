// Per-user creation quotas (QUOTA_* settings): an ordinary user cannot create organizations
// and sites without bound. Platform operators (superusers, staff, the CLI's system actor) are
// exempt. Counted under a row lock inside the creating transaction, so concurrent creates
// cannot overshoot.
import type { Actor } from '../auth/actor.ts';
import { DomainError } from '../errors.ts';

export const exemptFromQuotas = (actor: Actor): boolean => actor.kind === 'system' || actor.is_superuser || actor.is_staff;

/** 422 BUSINESS_LOGIC_ERROR when `count` already reached `limit` (0: no limit). */
export function checkQuota(count: number, limit: number, what: string): void {
  if (limit > 0 && count >= limit) {
    throw new DomainError('BUSINESS_LOGIC_ERROR', `Quota reached: ${what} (at most ${limit}). Ask a platform administrator to raise it.`, {
      data: { limit, count },
    });
  }
}
