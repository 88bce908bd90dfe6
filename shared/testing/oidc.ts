// Identity providers for the social login tests: a real OpenID provider (oidc-provider) on
// loopback, whose login and consent pages answer at once for the account the test chose, and a
// browser stand-in that follows its redirects with cookies until the client's redirect URI.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
// @ts-expect-error oidc-provider ships no type declarations
import Provider from 'oidc-provider';

export interface TestOidcProvider {
  issuer: string;
  /** The OP's accounts: id → claims (email, email_verified, preferred_username, …). */
  accounts: Map<string, Record<string, unknown>>;
  /** Who the next authorization signs in as. */
  signInAs(account: string): void;
  close(): Promise<void>;
}

export async function startOidcProvider(client: { clientId: string; clientSecret: string; redirectUri: string }): Promise<TestOidcProvider> {
  const accounts = new Map<string, Record<string, unknown>>();
  let current = '';
  let provider: any;
  const server = http.createServer(async (req, res) => {
    try {
      if (req.url?.startsWith('/interaction/')) {
        const details = await provider.interactionDetails(req, res);
        const grant = new provider.Grant({ accountId: current, clientId: details.params.client_id });
        grant.addOIDCScope(details.params.scope);
        const grantId = await grant.save();
        await provider.interactionFinished(req, res, { login: { accountId: current }, consent: { grantId } }, { mergeWithLastSubmission: false });
        return;
      }
      provider.callback()(req, res);
    } catch (err) {
      res.writeHead(500).end(String(err));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  provider = new Provider(issuer, {
    clients: [{ client_id: client.clientId, client_secret: client.clientSecret, redirect_uris: [client.redirectUri], token_endpoint_auth_method: 'client_secret_post' }],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['preferred_username', 'given_name', 'family_name', 'name'] },
    findAccount: async (_ctx: unknown, id: string) => ({ accountId: id, claims: async () => ({ sub: id, ...accounts.get(id) }) }),
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    features: { devInteractions: { enabled: false } },
    cookies: { keys: ['test-cookie-key'] },
  });
  return {
    issuer,
    accounts,
    signInAs: (account) => void (current = account),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Plays the browser: follows redirects (with the cookies set on the way) until one goes to `redirectUri`; its query. */
export async function followToRedirect(url: string, redirectUri: string): Promise<URLSearchParams> {
  const jar = new Map<string, string>();
  let next = url;
  for (let i = 0; i < 10; i++) {
    const res = await fetch(next, { redirect: 'manual', headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
    for (const c of res.headers.getSetCookie()) {
      const [kv] = c.split(';');
      const at = kv!.indexOf('=');
      jar.set(kv!.slice(0, at), kv!.slice(at + 1));
    }
    const location = res.headers.get('location');
    if (!location) throw new Error(`no redirect from ${next}: ${res.status} ${await res.text()}`);
    const target = new URL(location, next);
    if (target.href.startsWith(redirectUri)) return target.searchParams;
    next = target.href;
  }
  throw new Error('too many redirects');
}
