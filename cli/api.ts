// The CLI is one client of the platform API. A command describes a request (method, path,
// query, body or a stream, and the site it addresses) and renders the answer; a transport
// carries it: remote (HTTP to the API URL with the stored login, cli/remote.ts) or direct (the
// server's own Koa application in this process, cli/direct.ts). Both answer with the server's
// own status and body, so validation, errors, permissions and output are the server's in both.
import type { Readable } from 'node:stream';
import { DomainError, notFound } from '../shared/errors.ts';
import { isValidSchemaName } from '../shared/tenancy/schema.ts';

export type Mode = 'remote' | 'direct';
export type QueryValue = string | string[] | undefined;

export interface ApiRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The API path (`/api/apps/x/`); build it with `path\`…\`` so that values are encoded. */
  path: string;
  /** The site (schema name) whose API this is: the path becomes `/sites/<site><path>`. */
  site?: string;
  /** Query parameters in order; a repeated one as an array; undefined ones left out. */
  query?: Record<string, QueryValue>;
  /** A JSON body. */
  body?: unknown;
  /** A raw body instead, opened again if the request has to be repeated (a refreshed token). */
  upload?: { open: () => Readable; contentType: string; length?: number };
  /** Further request headers (an upload's `X-Metadata-*`); the transport's own (accept, authorization, content type) win. */
  headers?: Record<string, string>;
  /** Sent without a token (sign-in). */
  anonymous?: boolean;
}

export interface ApiResponse {
  status: number;
  /** The body as it arrives (call once). */
  stream(): Readable;
  text(): Promise<string>;
  /** A response header (`content-length`), or undefined. */
  header(name: string): string | undefined;
}

export interface Transport {
  readonly mode: Mode;
  send(req: ApiRequest, accept: string): Promise<ApiResponse>;
  close(): Promise<void>;
}

/** The object without its undefined values (a request body of the flags that were given). */
export function defined<T extends Record<string, unknown>>(object: T): Partial<T> {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The JSON value of a text, or undefined when it is empty or not JSON. */
export function jsonOrUndefined(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

/** A stream's bytes as UTF-8 text. */
async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}

/** A request as sent: the caller's headers (lower-cased) under the transport's own (accept, content type and length), and the body. */
export function outgoing(req: ApiRequest, accept: string): { headers: Record<string, string>; body?: string | Readable } {
  const headers: Record<string, string> = { ...Object.fromEntries(Object.entries(req.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])), accept };
  if (req.upload) {
    headers['content-type'] = req.upload.contentType;
    if (req.upload.length !== undefined) headers['content-length'] = String(req.upload.length);
    return { headers, body: req.upload.open() };
  }
  if (req.body === undefined) return { headers };
  const body = JSON.stringify(req.body);
  return { headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }, body };
}

/** An answer of either transport: its status, its body (read once), its headers by lower-case name. */
export function response(status: number, stream: Readable, headers: Record<string, string | string[] | number | undefined>): ApiResponse {
  const header = (name: string) => {
    const value = headers[name.toLowerCase()];
    return value === undefined ? undefined : Array.isArray(value) ? value.join(', ') : String(value);
  };
  return { status, stream: () => stream, text: () => readAll(stream), header };
}

/** A value as one path segment, URI-encoded. URLs resolve `.` and `..` segments (encoded ones too): such a name would move the request elsewhere. */
export function segment(v: string): string {
  if (v === '' || v === '.' || v === '..') throw new DomainError('BAD_REQUEST', `"${v}" is not a valid name.`);
  return encodeURIComponent(v);
}

/** `path\`/api/apps/${slug}/\``: every interpolated value URI-encoded. */
export function path(strings: TemplateStringsArray, ...values: string[]): string {
  return strings.reduce((out, s, i) => out + s + (i < values.length ? segment(values[i]!) : ''), '');
}

/** The request's path and query string as the server sees them (site routes in their `/sites/<schema>` form). */
export function target(req: ApiRequest): string {
  if (req.site !== undefined && !isValidSchemaName(req.site)) throw notFound('Site');
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(req.query ?? {})) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) params.append(key, v);
  }
  const qs = params.toString();
  return `${req.site === undefined ? '' : `/sites/${req.site}`}${req.path}${qs ? `?${qs}` : ''}`;
}

/** Parses a JSON answer; an error status becomes the DomainError of its envelope. */
async function decode<T>(res: ApiResponse, req: ApiRequest): Promise<T> {
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    if (res.status < 400) throw new DomainError('BAD_GATEWAY', `The API answered ${req.method} ${req.path} with a body that is not JSON.`);
  }
  if (res.status < 200 || res.status >= 300) throw DomainError.fromBody(res.status, body);
  return body as T;
}

export class Api {
  readonly transport: Transport;

  constructor(transport: Transport) {
    this.transport = transport;
  }

  get mode(): Mode {
    return this.transport.mode;
  }

  /** What a Ctrl-C leaves behind: the writes the API accepted, and the one still waiting for its answer. */
  readonly applied: string[] = [];
  inFlight: string | undefined;

  /** One exchange; a write (not a sign-in exchange) is tracked until its answer says whether it was applied. */
  private async send(req: ApiRequest, accept: string): Promise<ApiResponse> {
    if (req.method === 'GET' || req.anonymous) return this.transport.send(req, accept);
    const what = `${req.method} ${target(req).split('?')[0]}`;
    this.inFlight = what;
    try {
      const res = await this.transport.send(req, accept);
      if (res.status < 300) this.applied.push(what);
      return res;
    } finally {
      this.inFlight = undefined;
    }
  }

  /** A request answered with JSON (or nothing: 204). */
  async call<T>(req: ApiRequest): Promise<T> {
    return decode<T>(await this.send(req, 'application/json'), req);
  }

  /** A request whose answer is a stream of `accept` (a CSV export, an object's bytes) with its headers; an error answer throws. */
  async receive(req: ApiRequest, accept: string): Promise<ApiResponse> {
    const res = await this.send(req, `${accept}, application/json`);
    if (res.status >= 200 && res.status < 300) return res;
    return decode<never>(res, req);
  }
}
