// `platform invite …`: invitations to an organization (/api/cloud/organizations/{org}/invitations/).
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import { DomainError } from '../../shared/errors.ts';
import type { InvitationView } from '../../shared/invitations/invitation.schemas.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageTable, when, type Column } from '../output.ts';

const orgFlag = Flags.string({ summary: 'Organization slug or UUID.', required: true });
const invitationArg = { invitation: Args.string({ name: 'invitation', description: 'Invitation UUID (or integer id)', required: true }) };
const invitations = (org: string) => path`/api/cloud/organizations/${org}/invitations/`;

/** `slug:perm1,perm2` → {slug, permissions}. */
function parseSiteGrant(text: string): { slug: string; permissions: string[] } {
  const colon = text.indexOf(':');
  if (colon <= 0) throw new DomainError('BAD_REQUEST', `Invalid --site ${JSON.stringify(text)}: expected slug:permission[,permission…].`);
  const permissions = text.slice(colon + 1).split(',').map((p) => p.trim()).filter(Boolean);
  return { slug: text.slice(0, colon).trim(), permissions };
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

export const INVITE_COMMANDS = {
  'invite:list': operation({
    summary: 'List the invitations of an organization.',
    description: "Newest first. Prints the API's pagination body {count, next, previous, results} with --json. Tokens are never shown.",
    examples: ['invite list --org acme', 'invite list --org acme --state pending --json'],
    flags: {
      org: orgFlag,
      state: Flags.string({ summary: 'pending, accepted, cancelled or expired.' }),
      search: Flags.string({ summary: 'Part of the invitee e-mail.' }),
      page: Flags.string({ summary: 'Page number, or "last" (default 1).' }),
      'page-size': Flags.string({ summary: 'Invitations per page (default 20, at most 100).' }),
    },
    request: ({ flags: f }) => ({ method: 'GET', path: invitations(f.org), query: { state: f.state, search: f.search, page: f.page, page_size: f['page-size'] } }),
    render: (page: PageEnvelope<InvitationView>) => pageTable(page, COLUMNS, ['invitation', 'invitations']),
  }),

  'invite:create': operation({
    summary: 'Invite someone to an organization (sends the invitation e-mail).',
    description:
      "The e-mail goes through SMTP_URL, or is written as an .eml file under <PLATFORM_DATA_DIR>/outbox/ (in direct mode: this machine's). Prints the API body {status, message, data} with --json.",
    examples: [
      'invite create --org acme --email ada@example.com',
      'invite create --org acme --email ada@example.com --permission view_organization --group Editors --site shop:view_site,access_site',
    ],
    flags: {
      org: orgFlag,
      email: Flags.string({ summary: 'E-mail of the invitee.', required: true }),
      permission: Flags.string({ summary: 'Organization permission granted on acceptance (repeatable).', multiple: true }),
      group: Flags.string({ summary: 'Group joined on acceptance: id or name (repeatable).', multiple: true }),
      site: Flags.string({ summary: 'Site permissions granted on acceptance: slug:perm1,perm2 (repeatable).', multiple: true }),
    },
    request: ({ flags: f }) => {
      const config = defined({ group: f.group?.map((g) => (/^\d+$/.test(g) ? Number(g) : g)), site: f.site?.map(parseSiteGrant) });
      const body = defined({ invitee_identifier: f.email, permissions: f.permission, invitation_config: Object.keys(config).length ? config : undefined });
      return { method: 'POST', path: invitations(f.org), body };
    },
  }),

  'invite:get': operation({
    summary: 'Show an invitation.',
    examples: ['invite get 5f0c…-uuid --org acme', 'invite get 12 --org acme --json'],
    args: invitationArg,
    flags: { org: orgFlag },
    request: ({ flags, args }) => ({ method: 'GET', path: invitations(flags.org) + path`${args.invitation}/` }),
  }),

  'invite:cancel': operation({
    summary: 'Cancel an invitation (its link stops working).',
    examples: ['invite cancel 5f0c…-uuid --org acme'],
    args: invitationArg,
    flags: { org: orgFlag },
    request: ({ flags, args }) => ({ method: 'DELETE', path: invitations(flags.org) + path`${args.invitation}/` }),
  }),

  'invite:resend': operation({
    summary: 'Send an invitation e-mail again (same link; the expiry starts again).',
    examples: ['invite resend 12 --org acme'],
    args: invitationArg,
    flags: { org: orgFlag },
    request: ({ flags, args }) => ({ method: 'POST', path: invitations(flags.org) + path`${args.invitation}/resend/` }),
  }),
};
