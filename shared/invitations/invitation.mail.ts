// The invitation e-mail: the only place the token leaves the server (it is in no API response
// and no log line). Links are absolute: PLATFORM_PUBLIC_URL, else the origin of the request.
import { escapeHtml, type MailLinks, type MailMessage } from '../mail/mailer.ts';

/** What the invitation services need beyond their context: the mailer, the link base, the lifetime. */
export interface InvitationDeps extends MailLinks {
  ttlDays: number;
}

export const INVITATION_MESSAGES = {
  created: 'Invitation created and sent.',
  resent: 'Invitation sent again.',
  cancelled: 'Invitation cancelled.',
  accepted: 'Invitation accepted.',
} as const;

export function invitationLinks(baseUrl: string, token: string): { details: string; accept: string } {
  return {
    details: new URL(`/api/cloud/invitations/${token}/details/`, baseUrl).toString(),
    accept: new URL(`/api/cloud/invitations/${token}/accept/`, baseUrl).toString(),
  };
}

export function invitationMessage(input: {
  to: string;
  token: string;
  organization: { name: string; slug: string };
  inviter: string | null;
  expiresAt: Date;
  baseUrl: string;
}): MailMessage {
  const links = invitationLinks(input.baseUrl, input.token);
  const who = input.inviter ? `${input.inviter} invited you` : 'You are invited';
  const expires = input.expiresAt.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
  const text = [
    `${who} to join the organization "${input.organization.name}" (${input.organization.slug}).`,
    '',
    'See the invitation:',
    links.details,
    '',
    'Accept it (POST, no sign-in needed):',
    links.accept,
    '',
    `The invitation expires on ${expires} and can be used once.`,
    'If you did not expect it, ignore this message.',
    '',
  ].join('\n');
  const html = [
    `<p>${escapeHtml(who)} to join the organization <strong>${escapeHtml(input.organization.name)}</strong> (${escapeHtml(input.organization.slug)}).</p>`,
    `<p><a href="${links.details}">See the invitation</a></p>`,
    `<form method="post" action="${links.accept}"><button type="submit">Accept the invitation</button></form>`,
    `<p>Accept link (POST): ${links.accept}</p>`,
    `<p>The invitation expires on ${expires} and can be used once. If you did not expect it, ignore this message.</p>`,
  ].join('\n');
  return { to: input.to, subject: `Invitation to join ${input.organization.name}`, text, html };
}

/** Sends the invitation e-mail. */
export function sendInvitationMail(deps: InvitationDeps, input: Omit<Parameters<typeof invitationMessage>[0], 'baseUrl'>): Promise<unknown> {
  return deps.mailer.send(invitationMessage({ ...input, baseUrl: deps.baseUrl }));
}
