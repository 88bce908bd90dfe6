import { Flags } from '@oclif/core';
import { DomainError } from '../../shared/errors.ts';
import { isValidSchemaName } from '../../shared/tenancy/schema.ts';
import type { TokenPair } from '../../shared/auth/auth.service.ts';
import type { UserView } from '../../shared/users/user.schemas.ts';
import { apiUrlFlag, BaseCommand, connection, profileFlag } from '../base.ts';
import { Api } from '../api.ts';
import { DEFAULT_PROFILE } from '../credentials.ts';
import { ask, askHidden, canPrompt, missingValue } from '../prompt.ts';

export default class LoginCommand extends BaseCommand<typeof LoginCommand> {
  static override summary = 'Log in to a platform API; the URL and the tokens are remembered for later commands.';
  static override description =
    'Stores the API URL and the access and refresh tokens in a profile ("default", or --profile / $PLATFORM_PROFILE) of <config dir>/credentials.json (mode 0600), so that later commands need neither --api-url nor a password; the config dir is $PLATFORM_CONFIG_DIR, else $XDG_CONFIG_HOME/platform, else ~/.config/platform. Without --api-url, the profile\'s remembered URL. Prompts for what is missing (the password without echo).';
  static override examples = [
    '<%= config.bin %> login --api-url https://platform.example.com --username alice',
    '<%= config.bin %> login --api-url https://staging.example.com --profile staging',
    '<%= config.bin %> login --site shop_prod --username alice',
  ];
  static override baseFlags = { 'api-url': apiUrlFlag, profile: profileFlag };
  static override flags = {
    username: Flags.string({ summary: 'Username or e-mail.' }),
    password: Flags.string({ summary: 'Password (prompted for, hidden, when omitted on a terminal).' }),
    site: Flags.string({
      summary: 'Log in to one site (its schema name) as a user of that site: <api-url>/sites/<site>/api/…; stored beside the platform login.',
    }),
  };

  async run() {
    const { store, remote } = await connection(this.flags, '');
    const site = this.flags.site;
    if (site !== undefined && !isValidSchemaName(site)) throw new DomainError('BAD_REQUEST', `Invalid site ${JSON.stringify(site)}: expected its schema name.`);
    const apiUrl = remote.urlOf(site);
    const interactive = canPrompt();
    const username = this.flags.username ?? (interactive ? await ask('Username: ') : undefined);
    if (!username) throw missingValue('username');
    const password = this.flags.password ?? (interactive ? await askHidden('Password: ') : undefined);
    if (!password) throw missingValue('password');

    const api = new Api(remote);
    const tokens = await api.call<TokenPair>({ method: 'POST', site, path: '/api/auth/jwt/token/', body: { username, password }, anonymous: true });
    store.set(apiUrl, { ...tokens, username });
    // The canonical username (the login may have been an e-mail or another case). The platform
    // login's URL becomes the profile's; a site login's only when the profile has none yet.
    const profile = await api.call<UserView>({ method: 'GET', site, path: '/api/profile/' });
    store.set(apiUrl, { ...tokens, username: profile.username }, site === undefined || store.apiUrl() === undefined ? remote.apiUrl : undefined);

    const where = site === undefined ? apiUrl : `site ${site} at ${remote.apiUrl}`;
    const named = store.profile === DEFAULT_PROFILE ? '' : ` (profile ${store.profile})`;
    const body = {
      status: 'success' as const,
      message: `Logged in to ${where} as ${profile.username}${named}.`,
      api_url: apiUrl,
      username: profile.username,
      profile: store.profile,
      ...(site === undefined ? {} : { site }),
    };
    this.log(body.message);
    return body;
  }
}
