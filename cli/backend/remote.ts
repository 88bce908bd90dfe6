// Remote mode: a typed client of our own HTTP API. Authenticated calls send the access
// token stored by `platform login`; when the API says the token is expired or invalid
// (401 INVALID_TOKEN) and a refresh token is stored, it refreshes once, saves the new
// access token and retries. Error bodies are decoded back into DomainError.
import type { CreatedBody, MessageBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import { DomainError, NOT_AUTHENTICATED_DETAIL } from '../../shared/errors.ts';
import type { UserCreate, UserUpdate, UserView } from '../../shared/users/user.schemas.ts';
import type { CredentialStore, Credentials } from '../credentials.ts';
import { PATHS, withQuery } from './paths.ts';
import type { Backend, UserListParams } from './types.ts';

const TIMEOUT_MS = 60_000;

/** The API URL to use, checked: a clear error when there is none or it is malformed. */
export function requireApiUrl(apiUrl: string | undefined, hint = ', or use --direct to work on the database'): string {
  if (!apiUrl) throw new DomainError('BAD_REQUEST', `No API URL: pass --api-url or set PLATFORM_API_URL${hint}.`);
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    throw new DomainError('BAD_REQUEST', `Invalid API URL ${JSON.stringify(apiUrl)}: expected http(s)://host[:port].`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new DomainError('BAD_REQUEST', `Invalid API URL ${JSON.stringify(apiUrl)}: expected http(s)://host[:port].`);
  }
  return apiUrl;
}

interface RequestOptions {
  body?: unknown;
  /** Send the stored access token (and refresh it when needed). */
  auth?: boolean;
}

export class ApiClient {
  readonly apiUrl: string;
  private readonly store: CredentialStore;

  constructor(apiUrl: string, store: CredentialStore) {
    this.apiUrl = apiUrl;
    this.store = store;
  }

  private url(path: string): string {
    return this.apiUrl.replace(/\/+$/, '') + path;
  }

  /** One HTTP exchange: status and parsed JSON body (network failures become 503 SERVICE_UNAVAILABLE). */
  private async send(method: string, path: string, body: unknown, access?: string): Promise<{ status: number; body: unknown }> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (access) headers.Authorization = `Bearer ${access}`;
    let res: Response;
    try {
      res = await fetch(this.url(path), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const reason = cause?.code ?? cause?.message ?? (err as Error).message;
      throw new DomainError('SERVICE_UNAVAILABLE', `Cannot reach the API at ${this.apiUrl} (${reason}).`);
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        if (res.ok) throw new DomainError('BAD_GATEWAY', `The API at ${this.apiUrl} answered ${method} ${path} with a body that is not JSON.`);
      }
    }
    return { status: res.status, body: parsed };
  }

  private credentials(): Credentials {
    const creds = this.store.get(this.apiUrl);
    if (!creds) {
      throw new DomainError('AUTHENTICATION_FAILED', `Not logged in to ${this.apiUrl}: run \`platform login\` first (or use --direct to work on the database).`, {
        detail: NOT_AUTHENTICATED_DETAIL,
      });
    }
    return creds;
  }

  /** Exchanges the stored refresh token for a new access token and saves it. */
  private async refresh(creds: Credentials): Promise<Credentials> {
    const res = await this.send('POST', PATHS.refresh, { refresh: creds.refresh });
    if (res.status !== 200) {
      const err = DomainError.fromBody(res.status, res.body);
      if (err.status !== 401) throw err;
      throw new DomainError('INVALID_TOKEN', `Your session at ${this.apiUrl} has ended (${err.message}): run \`platform login\` again.`, {
        detail: err.detail,
      });
    }
    const updated = { ...creds, access: (res.body as { access: string }).access };
    this.store.set(this.apiUrl, updated);
    return updated;
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    let creds = options.auth ? this.credentials() : undefined;
    let res = await this.send(method, path, options.body, creds?.access);
    if (creds && res.status === 401 && (res.body as { code?: string } | undefined)?.code === 'INVALID_TOKEN' && creds.refresh) {
      creds = await this.refresh(creds);
      res = await this.send(method, path, options.body, creds.access);
    }
    if (res.status < 200 || res.status >= 300) throw DomainError.fromBody(res.status, res.body);
    return res.body as T;
  }
}

export class RemoteBackend implements Backend {
  readonly mode = 'remote' as const;
  private readonly api: ApiClient;

  constructor(api: ApiClient) {
    this.api = api;
  }

  whoami(): Promise<UserView> {
    return this.api.request('GET', PATHS.profile, { auth: true });
  }

  listUsers(query: UserListParams): Promise<PageEnvelope<UserView>> {
    return this.api.request('GET', withQuery(PATHS.users, query), { auth: true });
  }

  createUser(input: UserCreate): Promise<CreatedBody<UserView>> {
    return this.api.request('POST', PATHS.users, { auth: true, body: input });
  }

  getUser(ref: string): Promise<UserView> {
    return this.api.request('GET', PATHS.user(ref), { auth: true });
  }

  updateUser(ref: string, input: UserUpdate): Promise<UserView> {
    return this.api.request('PUT', PATHS.user(ref), { auth: true, body: input });
  }

  deleteUser(ref: string): Promise<MessageBody> {
    return this.api.request('DELETE', PATHS.user(ref), { auth: true });
  }

  async close(): Promise<void> {}
}
