// The remote transport: HTTP to the API URL (--api-url / PLATFORM_API_URL, else the profile's) with the login that
// `platform login` stored for it. Site requests use the site's own login (`platform login
// --site`), or else a site token exchanged on demand for the platform login
// (POST /api/cloud/sites/<site>/token/: for the organization owners and admins who administer
// the site), kept beside it. A 401 INVALID_TOKEN refreshes the access token once and retries.
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { DomainError, NOT_AUTHENTICATED_DETAIL } from '../shared/errors.ts';
import { jsonOrUndefined, outgoing, path, response, target, type ApiRequest, type ApiResponse, type Transport } from './api.ts';
import type { CredentialStore, Credentials } from './credentials.ts';

const TIMEOUT_MS = 60_000;

/** The API URL to use, checked: a clear error when there is none or it is malformed. */
function requireApiUrl(apiUrl: string | undefined, hint: string): string {
  if (!apiUrl) throw new DomainError('BAD_REQUEST', `No API URL: pass --api-url, set PLATFORM_API_URL, or run \`platform login --api-url URL\` once (the profile remembers it)${hint}.`);
  let url: URL | undefined;
  try {
    url = new URL(apiUrl);
  } catch {
    // reported below
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:') {
    throw new DomainError('BAD_REQUEST', `Invalid API URL ${JSON.stringify(apiUrl)}: expected http(s)://host[:port].`);
  }
  return apiUrl.replace(/\/+$/, '');
}

const isInvalidToken = (status: number, body: unknown) => status === 401 && (body as { code?: string } | undefined)?.code === 'INVALID_TOKEN';

export class RemoteTransport implements Transport {
  readonly mode = 'remote' as const;
  readonly apiUrl: string;
  private readonly store: CredentialStore;

  /** `hint`: what else to do without an API URL (the commands that can work --direct say so). */
  constructor(apiUrl: string | undefined, store: CredentialStore, hint = ', or use --direct to work on the database') {
    this.apiUrl = requireApiUrl(apiUrl, hint);
    this.store = store;
  }

  private async exchange(method: string, url: string, headers: Record<string, string>, body?: string | Readable): Promise<ApiResponse> {
    try {
      return await request(method, url, headers, body);
    } catch (err) {
      if (err instanceof DomainError) throw err;
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new DomainError('SERVICE_UNAVAILABLE', `Cannot reach the API at ${this.apiUrl} (${reason}).`);
    }
  }

  private async raw(req: ApiRequest, accept: string, access?: string): Promise<ApiResponse> {
    const { headers, body } = outgoing(req, accept);
    if (access) headers.authorization = `Bearer ${access}`;
    else delete headers.authorization;
    return this.exchange(req.method, this.apiUrl + target(req), headers, body);
  }

  /** A JSON exchange for the transport's own needs (refresh, site tokens). */
  private async json(req: ApiRequest, access?: string): Promise<{ status: number; body: any }> {
    const res = await this.raw(req, 'application/json', access);
    return { status: res.status, body: jsonOrUndefined(await res.text()) };
  }

  private loginCommand(site?: string): string {
    return site === undefined ? 'platform login' : `platform login --site ${site}`;
  }

  /** The API's URL, or a site's (`<api-url>/sites/<schema>`): the key its login is stored under. */
  urlOf(site?: string): string {
    return site === undefined ? this.apiUrl : `${this.apiUrl}/sites/${site}`;
  }

  private notLoggedIn(site?: string): DomainError {
    return new DomainError('AUTHENTICATION_FAILED', `Not logged in to ${this.urlOf(site)}: run \`${this.loginCommand(site)}\` first (or use --direct to work on the database).`, {
      detail: NOT_AUTHENTICATED_DETAIL,
    });
  }

  /** The stored login for the request's API; for a site without one, a token exchanged for the platform login. */
  private async credentials(site?: string): Promise<Credentials> {
    const stored = this.store.get(this.urlOf(site));
    if (stored) return stored;
    if (site === undefined) throw this.notLoggedIn();
    return this.siteToken(site);
  }

  /** Exchanges the platform login for the site's token (the caller's rights are checked by the API, now). */
  private async siteToken(site: string): Promise<Credentials> {
    const platform = this.store.get(this.apiUrl);
    if (!platform) throw this.notLoggedIn(site);
    const req: ApiRequest = { method: 'POST', path: path`/api/cloud/sites/${site}/token/` };
    let res = await this.json(req, platform.access);
    if (isInvalidToken(res.status, res.body)) res = await this.json(req, (await this.refresh(platform)).access);
    if (res.status === 403) throw this.notLoggedIn(site); // not an administrator of the site: a login of its own is needed
    if (res.status !== 200) throw DomainError.fromBody(res.status, res.body);
    const creds = { ...(res.body as { access: string; refresh: string }), username: platform.username };
    this.store.set(this.urlOf(site), creds);
    return creds;
  }

  /** A new access token for a stored refresh token (saved); an ended session says to log in again. */
  private async refresh(creds: Credentials, site?: string): Promise<Credentials> {
    const res = await this.json({ method: 'POST', site, path: '/api/auth/jwt/token/refresh/', body: { refresh: creds.refresh }, anonymous: true });
    if (res.status !== 200) {
      const err = DomainError.fromBody(res.status, res.body);
      if (err.status !== 401) throw err;
      throw new DomainError('INVALID_TOKEN', `Your session at ${this.urlOf(site)} has ended (${err.message}): run \`${this.loginCommand(site)}\` again.`, { detail: err.detail });
    }
    const updated = { ...creds, access: (res.body as { access: string }).access };
    this.store.set(this.urlOf(site), updated);
    return updated;
  }

  async send(req: ApiRequest, accept: string): Promise<ApiResponse> {
    target(req); // a malformed site is "not found" before any login is looked for (as in direct mode)
    let creds = req.anonymous ? undefined : await this.credentials(req.site);
    let res = await this.raw(req, accept, creds?.access);
    if (creds && res.status === 401) {
      const text = await res.text();
      if (!isInvalidToken(res.status, jsonOrUndefined(text))) return { ...res, stream: () => Readable.from([text]), text: async () => text };
      const site = req.site;
      creds = await this.refresh(creds, site).catch((err: unknown) => {
        // A site session that ended: a new exchange, when there is a platform login to exchange.
        if (site === undefined || !this.store.get(this.apiUrl)) throw err;
        return this.siteToken(site);
      });
      res = await this.raw(req, accept, creds.access);
    }
    return res;
  }

  async close(): Promise<void> {}
}

/**
 * One exchange over node:http(s). A body stream is read as fast as the socket drains and nothing
 * of it is kept (fetch keeps every chunk it has sent until the exchange ends, so a large upload
 * would end up whole in memory). An answer that comes before the end of the body (a refusal:
 * too large, not allowed) stops the upload. The timeout is for the answer's head: a streamed
 * body (an upload, a download) lasts as long as its data.
 */
function request(method: string, url: string, headers: Record<string, string>, body?: string | Readable): Promise<ApiResponse> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const req = (target.protocol === 'https:' ? https : http).request(target, { method, headers, timeout: TIMEOUT_MS });
    let answered = false;
    req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer in ${TIMEOUT_MS / 1000} s`), { code: 'TimeoutError' })));
    req.on('response', (res) => {
      answered = true;
      req.setTimeout(0);
      if (body instanceof Readable && !body.readableEnded) {
        // Refused before the end: stop reading the file, and drop the connection once the answer is read.
        body.unpipe(req);
        body.destroy();
        res.once('close', () => req.destroy());
      }
      resolve(response(res.statusCode ?? 502, res, res.headers));
    });
    req.on('error', (err) => {
      if (!answered) reject(err); // after an answer, the server closing on the rest of the body is expected
    });
    if (!(body instanceof Readable)) return req.end(body);
    body.on('error', (err) => {
      if (answered) return;
      reject(new DomainError('BAD_REQUEST', `The upload stopped: ${err.message}`));
      req.destroy();
    });
    body.pipe(req);
  });
}
