import type { MessageBody } from '../../shared/common/envelopes.ts';
import { DomainError } from '../../shared/errors.ts';
import { apiUrlFlag, BaseCommand } from '../base.ts';
import { Flags } from '@oclif/core';
import { Api } from '../api.ts';
import { CredentialStore } from '../credentials.ts';
import { RemoteTransport } from '../remote.ts';

export default class LogoutCommand extends BaseCommand<typeof LogoutCommand> {
  static override summary = 'Log out: blacklist the stored refresh token and forget the credentials for that API URL.';
  static override examples = ['<%= config.bin %> logout'];
  static override baseFlags = { 'api-url': apiUrlFlag };
  static override flags = { site: Flags.string({ summary: 'Log out of one site (its schema name) instead of the platform.' }) };

  async run() {
    const store = new CredentialStore();
    const remote = new RemoteTransport(this.flags['api-url'], store, '');
    const apiUrl = remote.urlOf(this.flags.site);
    const creds = store.get(apiUrl);
    let body: MessageBody;
    if (!creds) {
      body = { status: 'success', message: `Not logged in to ${apiUrl}.` };
    } else {
      try {
        await new Api(remote).call({ method: 'POST', site: this.flags.site, path: '/api/auth/jwt/token/blacklist/', body: { refresh: creds.refresh }, anonymous: true });
      } catch (err) {
        // A refresh token the API refuses (expired, revoked) can do no harm: forget it. Any
        // other failure keeps the credentials, so that logging out can be retried.
        if (!(err instanceof DomainError && err.status === 401)) {
          throw new DomainError(err instanceof DomainError ? err.code : 'INTERNAL_ERROR', `${(err as Error).message} The credentials are kept: retry \`platform logout\`.`);
        }
      }
      store.delete(apiUrl);
      body = { status: 'success', message: `Logged out of ${apiUrl}.` };
    }
    this.log(body.message);
    return body;
  }
}
