import type { Config } from '../../shared/config.ts';
import type { Mailer, MailLinks } from '../../shared/mail/mailer.ts';
import type { AppContext } from './types.ts';

/** What routes that mail a link pass their service: the mailer, and PLATFORM_PUBLIC_URL, else the origin the request came to. */
export const mailLinks =
  (config: Pick<Config, 'publicUrl'>, mailer: Mailer) =>
  (ctx: AppContext): MailLinks => ({ mailer, baseUrl: config.publicUrl ?? `${ctx.protocol}://${ctx.host}` });
