// Direct mode's invitation dependencies: the same mailer as the server (SMTP_URL, else .eml
// files under <PLATFORM_DATA_DIR>/outbox/) logging to stderr at LOG_LEVEL, and links based on
// PLATFORM_PUBLIC_URL, else http://$HOST:$PORT (what the server would use for a local request).
import pino from 'pino';
import { createLogger } from '../../shared/common/logger.ts';
import type { Config } from '../../shared/config.ts';
import type { InvitationDeps } from '../../shared/invitations/invitation.mail.ts';
import { createMailer } from '../../shared/mail/mailer.ts';

export function directInvitationDeps(config: Config, origin: string): InvitationDeps {
  const log = createLogger(config.logLevel, { service: 'platform-cli', destination: pino.destination({ dest: 2, sync: true }) });
  return { mailer: createMailer(config, log), baseUrl: origin, ttlDays: config.invitationTtlDays };
}
