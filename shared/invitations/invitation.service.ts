// Invitations of an organization (spec Part 1 §2, §4): list, create (sends the e-mail), get,
// cancel, resend. Every operation needs `invite_members` on the organization. The public
// details/accept operations are in invitation.accept.ts.
import { randomUUID } from 'node:crypto';
import { likeEscape } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { validate } from '../common/validation.ts';
import { actorUuid, type ServiceContext } from '../context.ts';
import { iso } from '../db/sql.ts';
import { DomainError, fieldError, notFound } from '../errors.ts';
import { organizationFor } from '../organizations/lookup.ts';
import type { OrganizationEntity } from '../organizations/organization.entity.ts';
import { resolveInvitationGrants } from './invitation.grants.ts';
import { sendInvitationMail, type InvitationDeps } from './invitation.mail.ts';
import { refWhere, selectView, selectViews, STATE_SQL } from './invitation.queries.ts';
import { InvitationCreate, InvitationListQuery, type InvitationView } from './invitation.schemas.ts';

const manage = (ctx: ServiceContext, orgRef: string): Promise<OrganizationEntity> => organizationFor(ctx, orgRef, 'invite_members');

export async function listInvitations(ctx: ServiceContext, orgRef: string, rawQuery: unknown): Promise<Page<InvitationView>> {
  const query = validate(InvitationListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const org = await manage(ctx, orgRef);
  const where = ['i.organization_uuid = ?'];
  const params: unknown[] = [org.uuid];
  if (query.state) {
    where.push(`(${STATE_SQL}) = ?`);
    params.push(query.state);
  }
  if (query.search) {
    where.push('i.invitee_identifier ILIKE ?');
    params.push(`%${likeEscape(query.search)}%`);
  }
  const [{ count }] = (await ctx.em.execute(`SELECT count(*)::int AS count FROM public.invitations i WHERE ${where.join(' AND ')}`, params)) as { count: number }[];
  const page = resolvePage(pageReq, Number(count));
  const results = await selectViews(ctx.em, where.join(' AND '), [...params, page.pageSize, pageOffset(page)], 'ORDER BY i.created DESC, i.id DESC LIMIT ? OFFSET ?');
  return { ...page, count: Number(count), results };
}

const inviterName = (ctx: ServiceContext): string | null => (ctx.actor.kind === 'user' ? ctx.actor.username : null);

export async function createInvitation(ctx: ServiceContext, orgRef: string, rawInput: unknown, deps: InvitationDeps): Promise<InvitationView> {
  const input = validate(InvitationCreate, rawInput);
  const org = await manage(ctx, orgRef);
  const email = input.invitee_identifier.trim();
  const member = await ctx.em.execute(
    `SELECT 1 FROM public.organization_members m JOIN public.users u ON u.uuid = m.user_uuid
      WHERE m.organization_uuid = ? AND lower(u.email) = lower(?) AND NOT u.is_deleted LIMIT 1`,
    [org.uuid, email],
  );
  if (member.length) throw fieldError('invitee_identifier', 'A user with this e-mail is already a member of this organization.');
  const pending = await ctx.em.execute(
    `SELECT 1 FROM public.invitations i WHERE i.organization_uuid = ? AND lower(i.invitee_identifier) = lower(?) AND (${STATE_SQL}) = 'pending' LIMIT 1`,
    [org.uuid, email],
  );
  if (pending.length) throw fieldError('invitee_identifier', 'A pending invitation for this e-mail already exists: resend or cancel it.');
  const grants = await resolveInvitationGrants(ctx, org, input);
  // The row and the e-mail succeed together: if the mail cannot be sent, nothing is saved.
  const id = await ctx.em.transactional(async (tx) => {
    const [row] = (await tx.execute(
      `INSERT INTO public.invitations (uuid, token, organization_uuid, invitee_identifier, permissions, invitation_config, invited_by_uuid,
                                       expires_at, sent_count, last_sent_at)
       VALUES (?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, now() + make_interval(days => ?::int), 1, now())
       RETURNING id, token, expires_at`,
      [randomUUID(), randomUUID(), org.uuid, email, JSON.stringify(grants.permissions), JSON.stringify(grants.config),
        actorUuid(ctx), deps.ttlDays],
    )) as { id: number; token: string; expires_at: Date | string }[];
    await sendInvitationMail(deps, {
      to: email,
      token: row.token,
      organization: { name: org.name, slug: org.slug },
      inviter: inviterName(ctx),
      expiresAt: new Date(iso(row.expires_at)),
    });
    return row.id;
  });
  return selectView(ctx.em, 'i.id = ?', [id]);
}

export async function getInvitation(ctx: ServiceContext, orgRef: string, ref: string): Promise<InvitationView> {
  const org = await manage(ctx, orgRef);
  const [where, params] = refWhere(org.uuid, ref);
  return selectView(ctx.em, where, params);
}

const refused = (state: 'accepted' | 'cancelled', action: string): DomainError =>
  new DomainError('BAD_REQUEST', `This invitation has ${state === 'accepted' ? 'already been accepted' : 'been cancelled'} and cannot be ${action}.`, {
    data: { state },
  });

/** Cancels a pending (or expired) invitation; cancelling a cancelled one changes nothing. */
export async function cancelInvitation(ctx: ServiceContext, orgRef: string, ref: string): Promise<void> {
  const org = await manage(ctx, orgRef);
  const [where, params] = refWhere(org.uuid, ref);
  const updated = await ctx.em.execute(
    `UPDATE public.invitations i SET cancelled_at = now(), modified = now() WHERE ${where} AND i.accepted_at IS NULL AND i.cancelled_at IS NULL RETURNING i.id`,
    params,
  );
  if (updated.length) return;
  const current = await selectView(ctx.em, where, params); // 404 when there is none
  if (current.state === 'accepted') throw refused('accepted', 'cancelled');
}

/**
 * Sends the e-mail again with the same token, and renews the expiry (now + INVITATION_TTL_DAYS).
 * Refused for accepted and cancelled invitations. The row is locked so a concurrent accept waits.
 */
export async function resendInvitation(ctx: ServiceContext, orgRef: string, ref: string, deps: InvitationDeps): Promise<InvitationView> {
  const org = await manage(ctx, orgRef);
  const [where, params] = refWhere(org.uuid, ref);
  const id = await ctx.em.transactional(async (tx) => {
    const [row] = (await tx.execute(
      `SELECT i.id, i.token, i.invitee_identifier, i.accepted_at, i.cancelled_at, u.username AS inviter
         FROM public.invitations i LEFT JOIN public.users u ON u.uuid = i.invited_by_uuid WHERE ${where} FOR UPDATE OF i`,
      params,
    )) as { id: number; token: string; invitee_identifier: string; accepted_at: unknown; cancelled_at: unknown; inviter: string | null }[];
    if (!row) throw notFound('Invitation');
    if (row.accepted_at) throw refused('accepted', 'resent');
    if (row.cancelled_at) throw refused('cancelled', 'resent');
    const [{ expires_at }] = (await tx.execute(
      `UPDATE public.invitations SET sent_count = sent_count + 1, last_sent_at = now(), expires_at = now() + make_interval(days => ?::int), modified = now()
        WHERE id = ? RETURNING expires_at`,
      [deps.ttlDays, row.id],
    )) as { expires_at: Date | string }[];
    await sendInvitationMail(deps, {
      to: row.invitee_identifier,
      token: row.token,
      organization: { name: org.name, slug: org.slug },
      inviter: row.inviter,
      expiresAt: new Date(iso(expires_at)),
    });
    return row.id;
  });
  return selectView(ctx.em, 'i.id = ?', [id]);
}
