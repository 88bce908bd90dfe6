// `platform invite …`: invitations to an organization (/api/cloud/organizations/{org}/invitations/).
import { Flags } from '@oclif/core';
import { DomainError } from '../../shared/errors.ts';
import type { InvitationView } from '../../shared/invitations/invitation.schemas.ts';
import { defined } from '../api.ts';
import { api } from '../base.ts';
import { pageOf } from '../output.ts';

/** `slug:perm1,perm2` → {slug, permissions}. */
function siteGrant(text: string): { slug: string; permissions: string[] } {
  const colon = text.indexOf(':');
  if (colon <= 0) throw new DomainError('BAD_REQUEST', `Invalid --site ${JSON.stringify(text)}: expected slug:permission[,permission…].`);
  return { slug: text.slice(0, colon).trim(), permissions: text.slice(colon + 1).split(',').map((p) => p.trim()).filter(Boolean) };
}

export const INVITE_COMMANDS = {
  'invite:list': api('invitations_list', {
    examples: ['invite list --org acme', 'invite list --org acme --state pending --json'],
    render: pageOf<InvitationView>(['invitation', 'invitations'], 'id invitee_identifier:e-mail state invited_by sent_count:sent expires_at:expires uuid'),
  }),
  'invite:create': api('invitations_create', {
    description: "The e-mail goes through SMTP_URL, or is written as an .eml file under <PLATFORM_DATA_DIR>/outbox/ (in direct mode: this machine's).",
    examples: ['invite create --org acme --email ada@example.com', 'invite create --org acme --email ada@example.com --permission view_organization --group Editors --site shop:view_site,access_site'],
    rename: { invitee_identifier: 'email', permissions: 'permission', invitation_config: false },
    flags: {
      group: Flags.string({ summary: 'Group joined on acceptance: id or name (repeatable).', multiple: true }),
      site: Flags.string({ summary: 'Site permissions granted on acceptance: slug:perm1,perm2 (repeatable).', multiple: true }),
    },
    body: ({ flags: f }) => {
      const config = defined({ group: f.group?.map((g: string) => (/^\d+$/.test(g) ? Number(g) : g)), site: f.site?.map(siteGrant) });
      return { invitation_config: Object.keys(config).length ? config : undefined };
    },
  }),
  'invite:get': api('invitations_retrieve', { args: ['invitation'], examples: ['invite get 5f0c…-uuid --org acme', 'invite get 12 --org acme --json'] }),
  'invite:cancel': api('invitations_destroy', { args: ['invitation'], examples: ['invite cancel 5f0c…-uuid --org acme'] }),
  'invite:resend': api('invitations_resend', { args: ['invitation'], examples: ['invite resend 12 --org acme'] }),
};
