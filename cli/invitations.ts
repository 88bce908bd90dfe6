// What the invite commands share: the --org flag, the invitation argument, parsing of
// --permission/--group/--site into the request body, and how invitations are shown.
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../shared/common/pagination.ts';
import { DomainError } from '../shared/errors.ts';
import type { InvitationCreate, InvitationView } from '../shared/invitations/invitation.schemas.ts';
import { type Column, table, when } from './output.ts';

export const orgFlag = Flags.string({ summary: 'Organization slug or UUID.', required: true });

export const invitationArg = Args.string({ name: 'invitation', description: 'Invitation UUID (or integer id)', required: true });

export const createFlags = {
  org: orgFlag,
  email: Flags.string({ summary: 'E-mail of the invitee.', required: true }),
  permission: Flags.string({ summary: 'Organization permission granted on acceptance (repeatable).', multiple: true }),
  group: Flags.string({ summary: 'Group joined on acceptance: id or name (repeatable).', multiple: true }),
  site: Flags.string({ summary: 'Site permissions granted on acceptance: slug:perm1,perm2 (repeatable).', multiple: true }),
};

/** `slug:perm1,perm2` → {slug, permissions}. */
export function parseSiteGrant(text: string): { slug: string; permissions: string[] } {
  const colon = text.indexOf(':');
  if (colon <= 0) throw new DomainError('BAD_REQUEST', `Invalid --site ${JSON.stringify(text)}: expected slug:permission[,permission…].`);
  const permissions = text.slice(colon + 1).split(',').map((p) => p.trim()).filter(Boolean);
  return { slug: text.slice(0, colon).trim(), permissions };
}

/** The request body of `invite create`: only what was given. */
export function invitationInput(flags: { email: string; permission?: string[]; group?: string[]; site?: string[] }): InvitationCreate {
  const input: InvitationCreate = { invitee_identifier: flags.email };
  if (flags.permission?.length) input.permissions = flags.permission as InvitationCreate['permissions'];
  const config: NonNullable<InvitationCreate['invitation_config']> = {};
  if (flags.group?.length) config.group = flags.group.map((g) => (/^\d+$/.test(g) ? Number(g) : g));
  if (flags.site?.length) config.site = flags.site.map(parseSiteGrant) as NonNullable<typeof config.site>;
  if (Object.keys(config).length) input.invitation_config = config;
  return input;
}

const COLUMNS: Column<InvitationView>[] = [
  { header: 'Id', get: (i) => i.id },
  { header: 'E-mail', get: (i) => i.invitee_identifier },
  { header: 'State', get: (i) => i.state },
  { header: 'Invited by', get: (i) => i.invited_by },
  { header: 'Sent', get: (i) => i.sent_count },
  { header: 'Expires', get: (i) => when(i.expires_at) },
  { header: 'UUID', get: (i) => i.uuid },
];

export function invitationsTable(page: PageEnvelope<InvitationView>): string {
  const pageOf = (link: string | null) => (link ? (new URL(link).searchParams.get('page') ?? '1') : undefined);
  const next = pageOf(page.next);
  let footer = `${page.count} invitation${page.count === 1 ? '' : 's'}`;
  if (page.results.length < page.count) footer += `, ${page.results.length} shown`;
  if (next) footer += ` (next: --page ${next})`;
  return page.results.length ? `${table(page.results, COLUMNS)}\n\n${footer}` : footer;
}
