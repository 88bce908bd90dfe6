// Verified e-mail changes. A user who changes their own address does not get it at once: the
// new address waits in `pending_email`, and a single-use link (48 hours) is mailed to it.
// Until the link is used the new address counts for nothing — not for signing in, not for
// uniqueness, not for matching invitations — so nobody can claim another person's address.
// Operators (staff, superusers, the CLI's system actor) who set someone else's address are
// trusted and change it directly.
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { DomainError, fieldError, notFound } from '../errors.ts';
import { escapeHtml, type MailLinks } from '../mail/mailer.ts';
import { Type } from '@sinclair/typebox';

export const EMAIL_CONFIRMATION_HOURS = 48;

export const EMAIL_MESSAGES = { confirmed: 'E-mail address confirmed.' } as const;

export const EmailToken = Type.Object({ token: Type.String({ format: 'uuid', description: 'The token from the confirmation e-mail' }) });

export const emailTaken = () => fieldError('email', 'A user with that e-mail already exists.');

/** Whether another user (deleted ones included: a restored account must not collide) has this address. */
export async function emailInUse(em: EntityManager, email: string, exceptUuid?: string): Promise<boolean> {
  if (!email) return false;
  const rows = await em.execute(`SELECT 1 FROM public.users WHERE lower(email) = lower(?) AND email <> '' AND uuid IS DISTINCT FROM ? LIMIT 1`, [
    email,
    exceptUuid ?? null,
  ]);
  return rows.length > 0;
}

function confirmationLink(baseUrl: string, token: string): string {
  return new URL(`/api/profile/confirm-email/${token}/`, baseUrl).toString();
}

/**
 * Records `email` as the user's pending address (replacing an earlier pending one) and mails
 * the confirmation link to it; the row and the mail succeed together.
 */
export async function requestEmailChange(em: EntityManager, user: { uuid: string; username: string }, email: string, links: MailLinks): Promise<void> {
  if (await emailInUse(em, email, user.uuid)) throw emailTaken();
  await em.transactional(async (tx) => {
    const token = randomUUID();
    await tx.execute(
      `INSERT INTO public.email_confirmations (token, user_uuid, email, expires_at) VALUES (?, ?, ?, now() + make_interval(hours => ?::int))
       ON CONFLICT (user_uuid) DO UPDATE SET token = excluded.token, email = excluded.email, created = now(), expires_at = excluded.expires_at`,
      [token, user.uuid, email, EMAIL_CONFIRMATION_HOURS],
    );
    await tx.execute('UPDATE public.users SET pending_email = ?, modified = now() WHERE uuid = ?', [email, user.uuid]);
    const link = confirmationLink(links.baseUrl, token);
    await links.mailer.send({
      to: email,
      subject: 'Confirm your new e-mail address',
      text: [
        `Someone (hopefully you, as ${user.username}) asked to use this address for their platform account.`,
        '',
        `Confirm it (POST, within ${EMAIL_CONFIRMATION_HOURS} hours):`,
        link,
        '',
        'If you did not ask for this, ignore this message: nothing changes.',
        '',
      ].join('\n'),
      html: [
        `<p>Someone (hopefully you, as <strong>${escapeHtml(user.username)}</strong>) asked to use this address for their platform account.</p>`,
        `<form method="post" action="${link}"><button type="submit">Confirm this address</button></form>`,
        `<p>Confirmation link (POST, within ${EMAIL_CONFIRMATION_HOURS} hours): ${link}</p>`,
        '<p>If you did not ask for this, ignore this message: nothing changes.</p>',
      ].join('\n'),
    });
  });
}

/**
 * POST /api/profile/confirm-email/{token}/ (public: the token reached the new mailbox). The link
 * is single use: an expired one, or one whose address another account took meanwhile, is used
 * up too (the pending address is dropped) and answers 400.
 */
export async function confirmEmailChange(em: EntityManager, rawToken: string): Promise<{ username: string; email: string }> {
  const { token } = validate(EmailToken, { token: rawToken }, 'query');
  const outcome = await em.transactional(async (tx) => {
    const [row] = (await tx.execute(
      `DELETE FROM public.email_confirmations c USING public.users u
        WHERE c.token = ? AND u.uuid = c.user_uuid
        RETURNING c.user_uuid, c.email, c.expires_at < now() AS expired, u.username`,
      [token.toLowerCase()],
    )) as { user_uuid: string; email: string; expired: boolean; username: string }[];
    if (!row) return 'unknown' as const;
    const refused = row.expired ? ('expired' as const) : (await emailInUse(tx, row.email, row.user_uuid)) ? ('taken' as const) : undefined;
    await tx.execute(`UPDATE public.users SET ${refused ? '' : 'email = pending_email, '}pending_email = '', modified = now() WHERE uuid = ? AND pending_email = ?`, [
      row.user_uuid,
      row.email,
    ]);
    return refused ?? { username: row.username, email: row.email };
  }).catch((err) => {
    if (uniqueViolation(err) === 'users_email_key') return 'taken' as const;
    throw err;
  });
  if (outcome === 'unknown') throw notFound('Confirmation');
  if (outcome === 'expired') throw new DomainError('BAD_REQUEST', 'This confirmation link has expired: change the e-mail again to get a new one.');
  if (outcome === 'taken') throw new DomainError('BAD_REQUEST', 'Another account uses this e-mail address now; the change was not made.');
  return outcome;
}
