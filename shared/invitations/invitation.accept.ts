// The public side of an invitation (no authentication: the token from the e-mail is the
// credential). `details` shows what the invitee is offered, by name only; `accept` applies it
// once: in one transaction holding a row lock on the invitation, so of two concurrent accepts
// exactly one succeeds and the other finds it accepted.
//
// Identity: the invitation is bound to an e-mail address, and the token reached that mailbox.
// So accepting attaches the existing (not deleted) user with that e-mail, without a sign-in;
// when there is none, a user is created (username from the e-mail, as createUser does) with a
// generated password that is returned once in the response.
import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { hashPassword } from '../auth/passwords.ts';
import { likeEscape } from '../common/filters.ts';
import { nextSlug, slugify } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { DomainError, notFound } from '../errors.ts';
import { applyInvitationGrants, marks } from './invitation.grants.ts';
import { iso, json, STATE_SQL } from './invitation.queries.ts';
import { InvitationToken, type AcceptResult, type InvitationDetails, type InvitationState, type StoredInvitationConfig } from './invitation.schemas.ts';

const checkToken = (token: string): string => validate(InvitationToken, { token }, 'query').token.toLowerCase();

/** GET /api/cloud/invitations/{token}/details/: 404 for an unknown token; any state is shown. */
export async function invitationDetails(em: EntityManager, rawToken: string): Promise<InvitationDetails> {
  const token = checkToken(rawToken);
  const [row] = (await em.execute(
    `SELECT i.invitee_identifier, i.permissions, i.invitation_config, ${STATE_SQL} AS state, i.created, i.expires_at,
            i.organization_uuid, o.name AS org_name, o.slug AS org_slug, u.username AS invited_by
       FROM public.invitations i JOIN public.organizations o ON o.uuid = i.organization_uuid
       LEFT JOIN public.users u ON u.uuid = i.invited_by_uuid
      WHERE i.token = ?`,
    [token],
  )) as {
    invitee_identifier: string;
    permissions: string[] | string;
    invitation_config: StoredInvitationConfig | string;
    state: InvitationState;
    created: Date | string;
    expires_at: Date | string;
    organization_uuid: string;
    org_name: string;
    org_slug: string;
    invited_by: string | null;
  }[];
  if (!row) throw notFound('Invitation');
  const config = json(row.invitation_config);
  const groupIds = config.group ?? [];
  const groups = groupIds.length
    ? ((await em.execute(`SELECT name FROM public.groups WHERE id IN (${marks(groupIds.length)}) ORDER BY name`, groupIds)) as { name: string }[])
    : [];
  const siteGrants = config.site ?? [];
  const siteNames = siteGrants.length
    ? ((await em.execute(`SELECT slug, name FROM public.sites WHERE organization_uuid = ? AND slug IN (${marks(siteGrants.length)})`, [
        row.organization_uuid,
        ...siteGrants.map((s) => s.slug),
      ])) as { slug: string; name: string }[])
    : [];
  return {
    organization: { name: row.org_name, slug: row.org_slug },
    invitee_identifier: row.invitee_identifier,
    state: row.state,
    invited_by: row.invited_by,
    created: iso(row.created),
    expires_at: iso(row.expires_at),
    permissions: json(row.permissions),
    groups: groups.map((g) => g.name),
    sites: siteGrants.flatMap((s) => {
      const site = siteNames.find((n) => n.slug === s.slug);
      return site ? [{ slug: s.slug, name: site.name, permissions: s.permissions }] : [];
    }),
  };
}

const notAcceptable = (state: Exclude<InvitationState, 'pending'>): DomainError =>
  new DomainError(
    'BAD_REQUEST',
    { accepted: 'This invitation has already been accepted.', cancelled: 'This invitation has been cancelled.', expired: 'This invitation has expired.' }[state],
    { data: { state } },
  );

interface Invitee {
  uuid: string;
  username: string;
  created: boolean;
  password?: string;
}

/** The user with this e-mail, or a new one; inside the accept transaction (no separate commit). */
async function findOrCreateUser(tx: EntityManager, email: string): Promise<Invitee> {
  let password: string | undefined;
  let hash: string | undefined;
  for (let attempt = 0; attempt < 8; attempt++) {
    const [existing] = (await tx.execute(
      `SELECT uuid, username FROM public.users WHERE lower(email) = lower(?) AND email <> '' AND NOT is_deleted LIMIT 1`,
      [email],
    )) as { uuid: string; username: string }[];
    if (existing) return { ...existing, created: false };
    password ??= randomBytes(18).toString('base64url');
    hash ??= await hashPassword(password);
    const base = slugify(email.split('@')[0], 140) || 'user';
    const taken = (await tx.execute('SELECT username FROM public.users WHERE username ILIKE ?', [`${likeEscape(base)}%`])) as { username: string }[];
    const username = nextSlug(base, taken.map((u) => u.username));
    // ON CONFLICT DO NOTHING: a concurrent insert of this username (or of a user with this
    // e-mail) does not abort the transaction; the loop looks again.
    const [row] = (await tx.execute(
      'INSERT INTO public.users (uuid, username, email, password) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING uuid',
      [crypto.randomUUID(), username, email, hash],
    )) as { uuid: string }[];
    if (row) return { uuid: row.uuid, username, created: true, password };
  }
  throw new DomainError('CONFLICT', 'Could not create a user for this invitation; try again.');
}

/** POST /api/cloud/invitations/{token}/accept/ */
export async function acceptInvitation(em: EntityManager, rawToken: string): Promise<AcceptResult> {
  const token = checkToken(rawToken);
  return em.transactional(async (tx) => {
    const [inv] = (await tx.execute(
      `SELECT i.id, i.organization_uuid, i.invitee_identifier, i.permissions, i.invitation_config, ${STATE_SQL} AS state, o.slug AS org_slug
         FROM public.invitations i JOIN public.organizations o ON o.uuid = i.organization_uuid
        WHERE i.token = ? FOR UPDATE OF i`,
      [token],
    )) as {
      id: number;
      organization_uuid: string;
      invitee_identifier: string;
      permissions: string[] | string;
      invitation_config: StoredInvitationConfig | string;
      state: InvitationState;
      org_slug: string;
    }[];
    if (!inv) throw notFound('Invitation');
    // Read after the lock: a concurrent accept that committed first is seen here.
    if (inv.state !== 'pending') throw notAcceptable(inv.state);
    const user = await findOrCreateUser(tx, inv.invitee_identifier);
    await applyInvitationGrants(
      tx,
      { organization_uuid: inv.organization_uuid, permissions: json(inv.permissions), invitation_config: json(inv.invitation_config) },
      user.uuid,
    );
    await tx.execute('UPDATE public.invitations SET accepted_at = now(), accepted_by_uuid = ?, modified = now() WHERE id = ?', [user.uuid, inv.id]);
    return { organization: inv.org_slug, username: user.username, created: user.created, ...(user.password ? { password: user.password } : {}) };
  });
}
