import { Flags } from '@oclif/core';
import type { MessageBody } from '../../shared/common/envelopes.ts';
import { DomainError } from '../../shared/errors.ts';
import { apiUrlFlag, BaseCommand, connection, profileFlag } from '../base.ts';
import { Api } from '../api.ts';
import { apiKey, type Credentials } from '../credentials.ts';

export default class LogoutCommand extends BaseCommand<typeof LogoutCommand> {
  static override summary = "Log out: blacklist the stored refresh tokens and clear the profile's connection.";
  static override description =
    "Without --site: the platform login and every site login of that API URL (those of `login --site` and the site tokens exchanged for the platform login) are blacklisted and forgotten, and the profile forgets the URL. With --site: that site's login only.";
  static override examples = ['<%= config.bin %> logout', '<%= config.bin %> logout --profile staging', '<%= config.bin %> logout --site shop_prod'];
  static override baseFlags = { 'api-url': apiUrlFlag, profile: profileFlag };
  static override flags = { site: Flags.string({ summary: 'Log out of one site (its schema name) instead of the platform.' }) };

  async run() {
    const { store, remote } = await connection(this.flags, '');
    const site = this.flags.site;
    const apiUrl = remote.urlOf(site);
    const one = site === undefined ? undefined : store.get(apiUrl);
    const logins: [string, Credentials][] = site === undefined ? store.loginsOf(apiUrl) : one ? [[apiUrl, one]] : [];
    const api = new Api(remote);
    const platformKey = apiKey(remote.apiUrl);
    for (const [url, creds] of logins) {
      const of = url === platformKey ? undefined : url.slice(`${platformKey}/sites/`.length);
      try {
        await api.call({ method: 'POST', site: of, path: '/api/auth/jwt/token/blacklist/', body: { refresh: creds.refresh }, anonymous: true });
      } catch (err) {
        // A refresh token the API refuses (expired, revoked, a site gone) can do no harm: forget
        // it. Any other failure keeps the credentials, so that logging out can be retried.
        if (!(err instanceof DomainError && (err.status === 401 || err.status === 404))) {
          throw new DomainError(err instanceof DomainError ? err.code : 'INTERNAL_ERROR', `${(err as Error).message} The credentials are kept: retry \`platform logout\`.`);
        }
      }
      store.delete(url);
    }
    if (site === undefined) store.forgetApiUrl(apiUrl);
    const body: MessageBody = { status: 'success', message: logins.length ? `Logged out of ${apiUrl}.` : `Not logged in to ${apiUrl}.` };
    this.log(body.message);
    return body;
  }
}
