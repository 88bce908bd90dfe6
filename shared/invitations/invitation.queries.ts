// Reads of invitations as plain rows (one query with the organization slug and the usernames),
// and the state derived from the timestamps in one SQL expression.
import type { EntityManager } from '@mikro-orm/postgresql';
import { iso, type Timestamp } from '../db/sql.ts';
import { notFound } from '../errors.ts';
import type { InvitationState, InvitationView, StoredInvitationConfig } from './invitation.schemas.ts';

/** pending | accepted | cancelled | expired, from the row's timestamps (the database clock decides). */
export const STATE_SQL = `CASE WHEN i.accepted_at IS NOT NULL THEN 'accepted' WHEN i.cancelled_at IS NOT NULL THEN 'cancelled'
  WHEN i.expires_at <= now() THEN 'expired' ELSE 'pending' END`;

const VIEW_SQL = `
SELECT i.id, i.uuid, i.invitee_identifier, i.permissions, i.invitation_config, ${STATE_SQL} AS state, o.slug AS organization,
       ib.username AS invited_by, ab.username AS accepted_by, i.created, i.expires_at, i.accepted_at, i.cancelled_at,
       i.last_sent_at, i.sent_count
  FROM public.invitations i
  JOIN public.organizations o ON o.uuid = i.organization_uuid
  LEFT JOIN public.users ib ON ib.uuid = i.invited_by_uuid
  LEFT JOIN public.users ab ON ab.uuid = i.accepted_by_uuid`;

interface ViewRow {
  id: number;
  uuid: string;
  invitee_identifier: string;
  permissions: string[] | string;
  invitation_config: StoredInvitationConfig | string;
  state: InvitationState;
  organization: string;
  invited_by: string | null;
  accepted_by: string | null;
  created: Timestamp;
  expires_at: Timestamp;
  accepted_at: Timestamp | null;
  cancelled_at: Timestamp | null;
  last_sent_at: Timestamp | null;
  sent_count: number;
}

const isoOrNull = (value: Timestamp | null): string | null => (value === null ? null : iso(value));
export const json = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

function toView(r: ViewRow): InvitationView {
  return {
    id: Number(r.id),
    uuid: r.uuid,
    invitee_identifier: r.invitee_identifier,
    permissions: json(r.permissions),
    invitation_config: json(r.invitation_config),
    state: r.state,
    organization: r.organization,
    invited_by: r.invited_by,
    accepted_by: r.accepted_by,
    created: iso(r.created),
    expires_at: iso(r.expires_at),
    accepted_at: isoOrNull(r.accepted_at),
    cancelled_at: isoOrNull(r.cancelled_at),
    last_sent_at: isoOrNull(r.last_sent_at),
    sent_count: Number(r.sent_count),
  };
}

export async function selectViews(em: EntityManager, where: string, params: unknown[], tail = ''): Promise<InvitationView[]> {
  const rows = (await em.execute(`${VIEW_SQL} WHERE ${where} ${tail}`, params)) as ViewRow[];
  return rows.map(toView);
}

/** `WHERE` of one invitation of an organization, by UUID or integer id; 404 for anything else. */
export function refWhere(organizationUuid: string, ref: string): [string, unknown[]] {
  if (/^\d{1,10}$/.test(ref) && Number(ref) <= 2_147_483_647) return ['i.organization_uuid = ? AND i.id = ?', [organizationUuid, Number(ref)]];
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(ref)) {
    return ['i.organization_uuid = ? AND i.uuid = ?', [organizationUuid, ref.toLowerCase()]];
  }
  throw notFound('Invitation');
}

export async function selectView(em: EntityManager, where: string, params: unknown[]): Promise<InvitationView> {
  const [view] = await selectViews(em, where, params);
  if (!view) throw notFound('Invitation');
  return view;
}
