// Identity providers for the social login tests: a real OpenID provider (oidc-provider) on
// loopback, whose login and consent pages answer at once for the account the test chose, and a
// browser stand-in that follows its redirects with cookies until the client's redirect URI.
// `forgeNextIdToken()` makes its token endpoint answer once with the ID token re-signed by a
// foreign key under the provider's real key ID (what a forger who knows the `kid` can send).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPair, SignJWT } from 'jose';
// @ts-expect-error oidc-provider ships no type declarations
import Provider from 'oidc-provider';

export interface TestOidcProvider {
  issuer: string;
  /** The OP's accounts: id → claims (email, email_verified, preferred_username, …). */
  accounts: Map<string, Record<string, unknown>>;
  /** Who the next authorization signs in as. */
  signInAs(account: string): void;
  /** The next token response carries a forged ID token; resolves with its `kid` and the genuine token's once sent. */
  forgeNextIdToken(): Promise<{ genuineKid: string; forgedKid: string }>;
  close(): Promise<void>;
}

export async function startOidcProvider(client: { clientId: string; clientSecret: string; redirectUri: string }): Promise<TestOidcProvider> {
  const accounts = new Map<string, Record<string, unknown>>();
  let current = '';
  let provider: any;
  let forge: ((r: { genuineKid: string; forgedKid: string }) => void) | undefined;
  const server = http.createServer(async (req, res) => {
    try {
      if (forge && req.method === 'POST' && req.url?.startsWith('/token')) {
        const done = forge;
        forge = undefined;
        const end = res.end.bind(res) as (body: string) => void;
        (res as any).end = (chunk: Buffer | string) => {
          void forgeIdToken(String(chunk)).then(({ body, genuineKid, forgedKid }) => {
            res.setHeader('content-length', Buffer.byteLength(body));
            end(body);
            done({ genuineKid, forgedKid });
          });
          return res;
        };
      }
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
    forgeNextIdToken: () => new Promise((resolve) => void (forge = resolve)),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The token response with its ID token's claims signed again by a key of no one's JWKS, under the genuine header's `kid`. */
async function forgeIdToken(text: string): Promise<{ body: string; genuineKid: string; forgedKid: string }> {
  const response = JSON.parse(text);
  const [header, payload] = (response.id_token as string).split('.').slice(0, 2).map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()));
  const foreign = await generateKeyPair(header.alg);
  response.id_token = await new SignJWT(payload).setProtectedHeader({ alg: header.alg, kid: header.kid, typ: header.typ }).sign(foreign.privateKey);
  const forgedKid = JSON.parse(Buffer.from(response.id_token.split('.')[0], 'base64url').toString()).kid;
  return { body: JSON.stringify(response), genuineKid: header.kid, forgedKid };
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
