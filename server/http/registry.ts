// Every route is declared once, here-shaped: method, path, schemas, auth, handler. The
// registry mounts it on the router with validation and authentication, and generates the
// OpenAPI document from the very same schemas (no second hand-written copy).
import type Koa from 'koa';
import type { TSchema } from '@sinclair/typebox';
import { validate } from '../../shared/common/validation.ts';
import { DomainError, notAuthenticated, notFound } from '../../shared/errors.ts';
import { flagForm } from './envelopes.ts';
import { IDEMPOTENCY_HEADER, idempotent } from './idempotency.ts';
import type { AppContext, AppState } from './types.ts';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface RouteInput {
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
}

export interface RouteDef {
  method: Method;
  /** Koa-router syntax: `/api/cloud/users/:user/`. */
  path: string;
  /** Other paths serving the same operation (spec §1.2: `/api/users/` beside `/api/cloud/users/`). */
  aliases?: string[];
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** `public` routes need no credentials; every other route requires a bearer token or a session cookie (server/http/auth.ts). */
  auth: 'public' | 'user';
  /**
   * Where the route is served: the platform host (default), a site's host (or
   * `/sites/{schema}/…`), or both. Elsewhere it does not exist (404).
   */
  scope?: 'platform' | 'tenant' | 'both';
  /** `auth`: the login-attempt limit applies (spec §8.2). */
  rateLimit?: 'auth';
  /**
   * `data`: the body may be up to DATA_BODY_LIMIT_BYTES (bulk record writes) instead of BODY_LIMIT_BYTES.
   * `stream`: the body is not parsed at all: the handler streams `ctx.req` (uploads of any type and size).
   */
  bodyLimit?: 'data' | 'stream';
  /**
   * `long`: the service's transaction may run statements up to DATABASE_LONG_STATEMENT_TIMEOUT_MS
   * instead of DATABASE_STATEMENT_TIMEOUT_MS (the service's longTransaction sets it).
   */
  statementTimeout?: 'long';
  /**
   * `data`: the route's writes are data (records, edges, storage objects, function invocations),
   * never what the process's caches hold (users, tables, functions, policies, settings:
   * request-caches.ts): its answer does not wait for the caches to catch up with the commit
   * (middleware.ts). server/test/data-writes.test.ts proves that such routes notify nothing.
   */
  writes?: 'data';
  /**
   * The route takes an `Idempotency-Key` header (idempotency.ts): a retry with the same key gets
   * the first answer back instead of writing again. For creates and uploads.
   */
  idempotent?: true;
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  /**
   * A request body that is not JSON (`text/csv`): another media type is refused with 415, the
   * body is left unparsed for the handler to stream (`ctx.req`), and OpenAPI documents it.
   */
  rawBody?: { mediaType: string; description: string };
  /**
   * `flag`: every error of the route (input validation, authentication, the handler's) carries the
   * flag form's members too, `{success: false, status_code}`, beside the standard ones (spec
   * Part 1 §7): the routes whose successes answer in the flag form (storage objects, events).
   */
  errorForm?: 'flag';
  /** Status → response body schema (null for no body). */
  responses: Record<number, TSchema | null>;
  /** Status → another media type a response may take besides JSON (`{200: 'text/csv'}`), for OpenAPI. */
  produces?: Record<number, string>;
  handler: (ctx: AppContext, input: RouteInput) => Promise<void> | void;
}

export const defineRoute = (def: RouteDef): RouteDef => def;

/**
 * Every router of the app matches paths case-sensitively: `/API/…` is not `/api/…`. What the
 * router matched is the only path anything decides on (limits, body size: the route definition).
 */
export const ROUTER_OPTIONS = { sensitive: true } as const;

export type RouteStep = (ctx: AppContext, def: RouteDef) => Promise<void>;

const ERROR_RESPONSES: Record<number, string> = {
  400: 'Invalid input (VALIDATION_ERROR, field-keyed `errors`) or malformed request (BAD_REQUEST)',
  401: 'Authentication credentials were not provided or are invalid',
  403: 'You do not have permission to perform this action',
  404: 'Not found',
  413: 'Request body too large',
  415: 'Unsupported media type',
  409: 'A request with this Idempotency-Key is still being processed (Retry-After)',
  422: 'The Idempotency-Key was sent with another request',
  429: 'Rate limit exceeded',
};

export class RouteRegistry {
  readonly routes: RouteDef[] = [];

  add(...defs: RouteDef[]): this {
    this.routes.push(...defs);
    return this;
  }

  /**
   * The middleware serving every route. Each request runs: the steps (authentication, rate
   * limits, body parsing: `route → authenticate → limit → parse`), the auth requirement, input
   * validation, the handler. A path served for other methods only answers 405 with `Allow`
   * (OPTIONS: 200 with `Allow`; a method no route has: 501, which errors.ts answers as 405).
   */
  router(steps: RouteStep[]): Koa.Middleware<AppState, AppContext> {
    const run = async (ctx: AppContext, def: RouteDef) => {
      if (!def.errorForm) return serve(ctx, def);
      try {
        await serve(ctx, def);
      } catch (err) {
        throw err instanceof DomainError ? flagForm(err) : err;
      }
    };
    const serve = async (ctx: AppContext, def: RouteDef) => {
      ctx.state.route = def;
      for (const step of steps) await step(ctx, def);
      if (def.auth !== 'public' && !ctx.state.actor) throw notAuthenticated();
      if (def.body && ctx.request.length && !ctx.is('application/json', 'application/x-www-form-urlencoded')) {
        throw new DomainError('UNSUPPORTED_MEDIA_TYPE', `Unsupported media type "${ctx.get('Content-Type')}": send application/json.`);
      }
      if (def.rawBody && ctx.request.type !== def.rawBody.mediaType) {
        throw new DomainError('UNSUPPORTED_MEDIA_TYPE', `Unsupported media type "${ctx.get('Content-Type')}": send ${def.rawBody.mediaType}.`);
      }
      const params = def.params ? validate(def.params, { ...ctx.params }, 'query') : ctx.params;
      const query = def.query ? validate(def.query, { ...ctx.query }, 'query') : ctx.query;
      let body: unknown = undefined;
      if (def.body) {
        body = (ctx.request as { body?: unknown }).body;
        if (body === undefined || (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0 && !ctx.request.length)) {
          body = {};
        }
        body = validate(def.body, body);
      }
      const handle = async () => def.handler(ctx, { params: params as Record<string, string>, query: query as Record<string, unknown>, body });
      await (def.idempotent ? idempotent(ctx, def, handle) : handle());
    };
    const table = new RouteTable();
    for (const [index, def] of this.routes.entries()) for (const path of [def.path, ...(def.aliases ?? [])]) table.add(path, def, index);
    return async (ctx, next) => {
      const found = table.match(ctx.path);
      if (!found.length) return slashless(ctx, table) ? undefined : next();
      const method = ctx.method === 'HEAD' ? 'GET' : ctx.method;
      let best: { defs: RouteDef[]; index: number; params: Record<string, string> } | undefined;
      for (const { node, params } of found) {
        const route = node.methods.get(method);
        if (route && (!best || route.index < best.index)) best = { defs: route.defs, index: route.index, params };
      }
      if (best) {
        // One path can have a platform def and a tenant def (`/api/users/`: platform alias, site users): the one serving this host.
        const chosen = best.defs.find((d) => servesHost(d, ctx.state.tenant));
        if (!chosen) throw notFound({ message: `No route matches ${ctx.method} ${ctx.path} on this host.` });
        ctx.params = best.params;
        return run(ctx, chosen);
      }
      const allowed = [...new Set(found.flatMap(({ node }) => [...node.methods.keys()].flatMap((m) => (m === 'GET' ? ['HEAD', 'GET'] : [m]))))];
      ctx.set('Allow', allowed.join(', '));
      if (ctx.method === 'OPTIONS') {
        ctx.status = 200;
        ctx.body = '';
      } else ctx.status = IMPLEMENTED.has(ctx.method) ? 405 : 501;
    };
  }

  /** OpenAPI 3.1 document generated from the route schemas. */
  openapi(info: { title: string; version: string; description?: string }, components: Record<string, TSchema>): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    const onPlatform = new Set(this.routes.filter((d) => d.scope !== 'tenant').flatMap((d) => [d.path, ...(d.aliases ?? [])].map((p) => `${d.method} ${p}`)));
    for (const def of this.routes) {
      for (const [i, path] of [def.path, ...(def.aliases ?? [])].entries()) {
        // A site route sharing its path with a platform route is documented in its `/sites/{schema_name}/…` form.
        const prefixed = def.scope === 'tenant' && onPlatform.has(`${def.method} ${path}`);
        const oaPath = (prefixed ? `/sites/:schema_name${path}` : path).replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
        const parameters: unknown[] = prefixed
          ? [{ name: 'schema_name', in: 'path', required: true, schema: { type: 'string' }, description: 'The site schema (or call the path without this prefix on a site host)' }]
          : [];
        for (const [where, schema] of [['path', def.params], ['query', def.query]] as const) {
          if (!schema) continue;
          const props = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
          const required = new Set((schema as { required?: string[] }).required ?? []);
          for (const [name, prop] of Object.entries(props)) {
            parameters.push({ name, in: where, required: where === 'path' || required.has(name), schema: plain(prop), description: prop.description });
          }
        }
        const responses: Record<string, unknown> = {};
        for (const [status, schema] of Object.entries(def.responses)) {
          const other = def.produces?.[Number(status)];
          const content = {
            ...(schema ? { 'application/json': { schema: refOrInline(schema, plain) } } : {}),
            ...(other ? { [other]: { schema: { type: 'string' } } } : {}),
          };
          responses[status] = Object.keys(content).length ? { description: statusText(Number(status)), content } : { description: statusText(Number(status)) };
        }
        if (def.idempotent) {
          parameters.push({ name: IDEMPOTENCY_HEADER, in: 'header', required: false, schema: { type: 'string', minLength: 1, maxLength: 255 },
            description: 'A key of your own (a UUID): a retry with the same key and request gets the first answer back (header `Idempotent-Replayed: true`) for 24 hours instead of writing again (docs/api-conventions.md).' });
        }
        const errorStatuses = [...(def.body || def.query || def.params ? [400] : []), ...(def.auth === 'public' ? [] : [401, 403]), ...(def.rawBody ? [413, 415] : []), ...(def.idempotent ? [409, 422] : []), 429];
        if (/[:*]\w/.test(path)) errorStatuses.push(404);
        for (const status of errorStatuses) {
          responses[String(status)] ??= {
            description: ERROR_RESPONSES[status],
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
          };
        }
        (paths[oaPath] ??= {})[def.method] = {
          operationId: i === 0 ? def.operationId : `${def.operationId}_alias${i}`,
          summary: def.summary,
          description: def.description,
          tags: def.tags,
          security: def.auth === 'public' ? [] : [{ bearerAuth: [] }, { sessionAuth: [] }],
          parameters,
          ...(def.body ? { requestBody: { required: true, content: { 'application/json': { schema: refOrInline(def.body, plain) } } } } : {}),
          ...(def.rawBody ? { requestBody: { required: true, description: def.rawBody.description, content: { [def.rawBody.mediaType]: { schema: { type: 'string' } } } } } : {}),
          responses,
        };
      }
    }
    const schemas: Record<string, unknown> = {};
    for (const [name, schema] of Object.entries(components)) {
      const copy = plain(schema);
      delete copy.$id;
      schemas[name] = copy;
    }
    return {
      openapi: '3.1.0',
      info,
      servers: [{ url: '/' }],
      paths,
      components: {
        schemas,
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          // Browser sessions (POST /api/auth/session/); on a site the cookie is `sessionid_<schema>`. Unsafe methods also need the X-CSRF-Token header.
          sessionAuth: { type: 'apiKey', in: 'cookie', name: 'sessionid' },
        },
      },
    };
  }
}

const IMPLEMENTED = new Set(['HEAD', 'OPTIONS', 'GET', 'PUT', 'PATCH', 'POST', 'DELETE']);

interface RouteNode {
  statics: Map<string, RouteNode>;
  /** `:name` segments here (routes may name the same position differently). */
  params: { name: string; node: RouteNode }[];
  /** `*name` here: one or more whole segments, joined by `/` (an object key). */
  rests: { name: string; node: RouteNode }[];
  /** Method → the defs of this path (one per scope) and their registration order. */
  methods: Map<string, { defs: RouteDef[]; index: number }>;
}
const newNode = (): RouteNode => ({ statics: new Map(), params: [], rests: [], methods: new Map() });

/** `/a/b/` → ['a', 'b', '']. */
const segmentsOf = (path: string): string[] => path.slice(1).split('/');

function decodeParam(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * Paths by segment (a tree of literal segments and `:param`s): a request is matched in a few map
 * lookups, where a router tests every route's pattern in turn. Paths are case-sensitive and a
 * parameter is one non-empty segment (ROUTER_OPTIONS). Where a literal and a parameter both match,
 * the route registered first wins, as in the router. A `*rest` parameter (object keys) is one or
 * more segments, each decoded (so `%2F` inside a segment is a slash of the key, never a boundary).
 */
class RouteTable {
  private readonly root = newNode();

  add(path: string, def: RouteDef, index: number): void {
    let node = this.root;
    for (const segment of segmentsOf(path)) {
      if (segment.startsWith(':') || segment.startsWith('*')) {
        const name = segment.slice(1);
        const list = segment.startsWith(':') ? node.params : node.rests;
        let param = list.find((p) => p.name === name);
        if (!param) list.push((param = { name, node: newNode() }));
        node = param.node;
      } else {
        let next = node.statics.get(segment);
        if (!next) node.statics.set(segment, (next = newNode()));
        node = next;
      }
    }
    const method = def.method.toUpperCase();
    const entry = node.methods.get(method);
    if (!entry) node.methods.set(method, { defs: [def], index });
    else if (entry.defs.some((d) => scopesOverlap(d, def))) throw new Error(`Route ${method} ${path} is declared twice for the same scope (${def.operationId}).`);
    else entry.defs.push(def);
  }

  /** Every route node whose path matches, with its parameters: the path as it is, or with one trailing slash less (as the router allows). */
  match(path: string): { node: RouteNode; params: Record<string, string> }[] {
    const out: { node: RouteNode; params: Record<string, string> }[] = [];
    this.walk(segmentsOf(path), out);
    if (!out.length && path.length > 1 && path.endsWith('/')) this.walk(segmentsOf(path.slice(0, -1)), out);
    return out;
  }

  /**
   * Depth first over literals, then parameters, then rests. The captures of the branch being
   * tried are one stack of raw segments, pushed and popped; a match's parameters are built (and
   * decoded) only when a node is reached: trying a branch allocates nothing.
   */
  private walk(segments: string[], out: { node: RouteNode; params: Record<string, string> }[]): void {
    const names: string[] = [];
    const spans: [number, number][] = [];
    const walk = (node: RouteNode, i: number) => {
      if (i === segments.length) {
        if (!node.methods.size) return;
        const params: Record<string, string> = {};
        for (let k = 0; k < names.length; k++) {
          const [from, to] = spans[k]!;
          params[names[k]!] = to === from + 1 ? decodeParam(segments[from]!) : segments.slice(from, to).map(decodeParam).join('/');
        }
        out.push({ node, params });
        return;
      }
      const segment = segments[i]!;
      const next = node.statics.get(segment);
      if (next) walk(next, i + 1);
      if (segment !== '') for (const p of node.params) capture(p.name, p.node, i, i + 1);
      // A rest takes segments i..j-1, never the empty segment of a trailing slash (`a/b/` is the key `a/b`).
      for (const r of node.rests) {
        for (let j = i + 1; j <= segments.length && !(j === segments.length && segments[j - 1] === ''); j++) capture(r.name, r.node, i, j);
      }
    };
    const capture = (name: string, child: RouteNode, from: number, to: number) => {
      names.push(name);
      spans.push([from, to]);
      walk(child, to);
      names.pop();
      spans.pop();
    };
    walk(this.root, 0);
  }
}

/**
 * A path asked without the trailing slash its route has (`/api/apps`): GET and HEAD are redirected
 * (308) to the slash form, query kept; other methods answer 404 naming it (a client fixes the URL
 * rather than have a write sent again). Whether it answered.
 */
function slashless(ctx: AppContext, table: RouteTable): boolean {
  if (ctx.path.endsWith('/') || !table.match(`${ctx.path}/`).length) return false;
  const q = ctx.originalUrl.indexOf('?');
  const path = q < 0 ? ctx.originalUrl : ctx.originalUrl.slice(0, q);
  if (!path.startsWith('/') || path.startsWith('//') || path.endsWith('/')) return false;
  if (ctx.method === 'GET' || ctx.method === 'HEAD') {
    ctx.redirect(`${path}/${q < 0 ? '' : ctx.originalUrl.slice(q)}`);
    ctx.status = 308;
    return true;
  }
  throw notFound({ message: `No route matches ${ctx.method} ${ctx.path}: its path ends with a slash, ${ctx.path}/.` });
}

/** A JSON copy of a schema in which nested named schemas (`$id`) become component references. */
const scopeOf = (def: RouteDef) => def.scope ?? 'platform';

/** Whether a route is served where the request's tenant (null: the platform host) says. */
function servesHost(def: RouteDef, tenant: string | null): boolean {
  const scope = scopeOf(def);
  return scope === 'both' || (scope === 'tenant') === (tenant !== null);
}

function scopesOverlap(a: RouteDef, b: RouteDef): boolean {
  return scopeOf(a) === 'both' || scopeOf(b) === 'both' || scopeOf(a) === scopeOf(b);
}

function plain(schema: unknown, top = true): any {
  if (Array.isArray(schema)) return schema.map((s) => plain(s, false));
  if (!schema || typeof schema !== 'object') return schema;
  const s = schema as Record<string, unknown>;
  if (!top && typeof s.$id === 'string') return { $ref: `#/components/schemas/${s.$id}` };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s)) out[k] = plain(v, false);
  return out;
}

function refOrInline(schema: TSchema, copy: typeof plain): unknown {
  return schema.$id ? { $ref: `#/components/schemas/${schema.$id}` } : copy(schema);
}

function statusText(status: number): string {
  return ({ 200: 'OK', 201: 'Created', 204: 'No Content' } as Record<number, string>)[status] ?? String(status);
}
