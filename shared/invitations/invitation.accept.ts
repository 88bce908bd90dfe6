// The public side of an invitation (no authentication: the token from the e-mail is the
// credential). `details` shows what the invitee is offered, by name only; `accept` applies it
// once: in one transaction holding a row lock on the invitation, so of two concurrent accepts
// exactly one succeeds and the other finds it accepted.
//
// Identity and consent: the token proves control of the invited mailbox, not of an account.
// When an account with the invitee's e-mail exists, accepting attaches THAT account only with
// its own authentication (its bearer token, or its password in the body): nobody is attached
// to anything without signing in. Otherwise an account is created for the e-mail, through the
// one user-creation service, with the username, password and names the body asks for (a
// password is generated and returned once only when none is given).
import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { systemActor, type Actor } from '../auth/actor.ts';
import { verifyPassword } from '../auth/passwords.ts';
import { validate } from '../common/validation.ts';
import { makeContext } from '../context.ts';
import { iso } from '../db/sql.ts';
import { DomainError, notAuthenticated, notFound, permissionDenied, validationError } from '../errors.ts';
import { createUser } from '../users/user.service.ts';
import { applyInvitationGrants, marks } from './invitation.grants.ts';
import { json, STATE_SQL } from './invitation.queries.ts';
import {
  AcceptInput,
  InvitationToken,
  type AcceptResult,
  type InvitationDetails,
  type InvitationState,
  type StoredInvitationConfig,
} from './invitation.schemas.ts';

const checkToken = (token: string): string => validate(InvitationToken, { token }, 'query').token.toLowerCase();

/** GET /api/cloud/invitations/{token}/details/: 404 for an unknown token; any state is shown. */
export async function invitationDetails(em: EntityManager, rawToken: string): Promise<InvitationDetails> {
  const token = checkToken(rawToken);
  const [row] = (await em.execute(
    `SELECT i.invitee_identifier, i.permissions, i.invitation_config, ${STATE_SQL} AS state, i.created, i.expires_at,
            i.organization_uuid, o.name AS org_name, o.slug AS org_slug, u.username AS invited_by,
            EXISTS (SELECT 1 FROM public.users a WHERE lower(a.email) = lower(i.invitee_identifier) AND a.email <> '') AS account_exists
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
    account_exists: boolean;
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
    account_exists: row.account_exists,
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

/** Who is accepting, as far as the request says: its bearer token's user (if any) and the body. */
export interface AcceptRequest {
  em: EntityManager;
  actor?: Actor;
  input?: unknown;
}

const NEW_ACCOUNT_FIELDS = ['username', 'first_name', 'last_name'] as const;

/** The account with the invitee's e-mail, authenticated by this request; or a new account for the e-mail. */
async function invitee(tx: EntityManager, email: string, actor: Actor | undefined, input: AcceptInput): Promise<Invitee> {
  const [existing] = (await tx.execute(
    `SELECT uuid, username, password, is_active, is_deleted FROM public.users WHERE lower(email) = lower(?) AND email <> '' LIMIT 1`,
    [email],
  )) as { uuid: string; username: string; password: string; is_active: boolean; is_deleted: boolean }[];
  const signedIn = actor?.kind === 'user' && !actor.tenant ? actor.uuid : undefined;
  if (existing) {
    const extra = NEW_ACCOUNT_FIELDS.filter((f) => input[f] !== undefined);
    if (extra.length) {
      throw validationError(Object.fromEntries(extra.map((f) => [f, ['An account with the invited e-mail exists: this field applies to a new account only.']])));
    }
    if (existing.is_deleted || !existing.is_active) {
      throw new DomainError('BAD_REQUEST', 'The account with the invited e-mail is deactivated or deleted: ask a platform administrator to restore it.');
    }
    if (input.password !== undefined) {
      if (!(await verifyPassword(existing.password, input.password))) throw notAuthenticated('The password does not match the account with the invited e-mail.');
    } else if (signedIn !== existing.uuid) {
      if (signedIn) throw permissionDenied('This invitation was sent to the e-mail of another account: sign in as that account, or send its password.');
      throw notAuthenticated('An account with the invited e-mail exists: accept as that account, with its bearer token or its password in the body.');
    }
    return { uuid: existing.uuid, username: existing.username, created: false };
  }
  if (signedIn) {
    throw permissionDenied('This invitation was sent to an e-mail address that is not your account\'s: accept it signed out to create an account for that address.');
  }
  const password = input.password ?? randomBytes(18).toString('base64url');
  const user = await createUser(makeContext(tx, systemActor('invitation')), {
    email,
    password,
    ...Object.fromEntries(NEW_ACCOUNT_FIELDS.filter((f) => input[f] !== undefined).map((f) => [f, input[f]])),
  });
  return { uuid: user.uuid, username: user.username, created: true, ...(input.password === undefined ? { password } : {}) };
}

/** POST /api/cloud/invitations/{token}/accept/ */
export async function acceptInvitation({ em, actor, input: rawInput }: AcceptRequest, rawToken: string): Promise<AcceptResult> {
  const token = checkToken(rawToken);
  const input = validate(AcceptInput, rawInput ?? {});
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
    const user = await invitee(tx, inv.invitee_identifier, actor, input);
    await applyInvitationGrants(
      tx,
      { organization_uuid: inv.organization_uuid, permissions: json(inv.permissions), invitation_config: json(inv.invitation_config) },
      user.uuid,
    );
    await tx.execute('UPDATE public.invitations SET accepted_at = now(), accepted_by_uuid = ?, modified = now() WHERE id = ?', [user.uuid, inv.id]);
    return { organization: inv.org_slug, username: user.username, created: user.created, ...(user.password ? { password: user.password } : {}) };
  });
}
