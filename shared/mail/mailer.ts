// Outgoing mail. With SMTP_URL, nodemailer delivers over SMTP; without it, every message is
// composed by nodemailer (stream transport, RFC 822 with CRLF) and written as an `.eml` file
// under `<PLATFORM_DATA_DIR>/outbox/` (directory 0700, files 0600: a message may carry a
// secret link). The log line names the recipient and the file or message id, never the body.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Transporter } from 'nodemailer';
import type { Config } from '../config.ts';
import { DomainError } from '../errors.ts';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html?: string;
}

export interface SentMail {
  messageId: string;
  /** The `.eml` file written (outbox mode). */
  file?: string;
}

export interface Mailer {
  readonly transport: 'smtp' | 'outbox';
  /** Sends (or writes) one message; a delivery failure is 502 BAD_GATEWAY. */
  send(message: MailMessage): Promise<SentMail>;
  close(): void;
}

/** Text for an HTML body. */
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** What a service that mails a link needs: the mailer and the base of the absolute links in the message. */
export interface MailLinks {
  mailer: Mailer;
  /** `https://platform.example.com`: PLATFORM_PUBLIC_URL, else the origin of the request. */
  baseUrl: string;
}

/** The structured logger's shape as far as the mailer needs it (pino's `info(fields, msg)`). */
export interface MailLog {
  info(fields: Record<string, unknown>, message: string): void;
}

const silent: MailLog = { info: () => undefined };

export type MailConfig = Pick<Config, 'smtpUrl' | 'dataDir' | 'baseDomain'>;

/** The sender: `no-reply@<PLATFORM_BASE_DOMAIN>`. */
export const mailFrom = (config: Pick<Config, 'baseDomain'>): string => `Platform <no-reply@${config.baseDomain}>`;

export const outboxDir = (config: Pick<Config, 'dataDir'>): string => path.join(config.dataDir, 'outbox');

function deliveryFailed(err: unknown): DomainError {
  const e = err as { code?: string; responseCode?: number };
  const reason = e?.responseCode ? `SMTP ${e.responseCode}` : (e?.code ?? 'error');
  return new DomainError('BAD_GATEWAY', `The e-mail could not be sent (mail server: ${reason}). Nothing was changed; try again.`);
}

/**
 * A nodemailer transport made on the first message: nodemailer (≈ 35 ms to load) is imported
 * then, not by every process that only might send mail (the CLI's direct mode).
 */
function lazyTransport(options: Parameters<typeof import('nodemailer').createTransport>[0]) {
  let made: Promise<Transporter> | undefined;
  return {
    get: () => (made ??= import('nodemailer').then(({ default: nodemailer }) => nodemailer.createTransport(options))),
    close: () => void made?.then((t) => t.close()),
  };
}

export function createMailer(config: MailConfig, log: MailLog = silent): Mailer {
  const from = mailFrom(config);
  const base = { from, textEncoding: 'quoted-printable' as const };
  if (config.smtpUrl) {
    const transport = lazyTransport(config.smtpUrl);
    return {
      transport: 'smtp',
      async send(message) {
        let info: { messageId: string };
        try {
          info = await (await transport.get()).sendMail({ ...base, ...message });
        } catch (err) {
          throw deliveryFailed(err);
        }
        log.info({ to: message.to, messageId: info.messageId }, 'mail sent');
        return { messageId: info.messageId };
      },
      close: transport.close,
    };
  }
  const transport = lazyTransport({ streamTransport: true, buffer: true, newline: 'windows' });
  const dir = outboxDir(config);
  return {
    transport: 'outbox',
    async send(message) {
      const info = (await (await transport.get()).sendMail({ ...base, ...message })) as { messageId: string; message: Buffer };
      // Sortable by time, unique, and carrying nothing from the message (no recipient, no token).
      const file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(6).toString('hex')}.eml`);
      try {
        await fs.mkdir(dir, { recursive: true, mode: 0o700 });
        await fs.writeFile(file, info.message, { mode: 0o600, flag: 'wx' });
      } catch (err) {
        throw new DomainError('SERVICE_UNAVAILABLE', `The e-mail could not be written to the outbox ${dir} (${(err as { code?: string }).code ?? 'error'}). Nothing was changed.`);
      }
      log.info({ to: message.to, file }, 'mail written to outbox');
      return { messageId: info.messageId, file };
    },
    close: transport.close,
  };
}
