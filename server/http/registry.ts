// Every route is declared once, here-shaped: method, path, schemas, auth, handler. The
// registry mounts it on the router with validation and authentication, and generates the
// OpenAPI document from the very same schemas (no second hand-written copy).
import Router from '@koa/router';
import type { TSchema } from '@sinclair/typebox';
import { validate } from '../../shared/common/validation.ts';
import { DomainError, notAuthenticated, notFound } from '../../shared/errors.ts';
import type { AppContext } from './types.ts';

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
  /** `public` routes need no token; every other route requires a bearer token. */
  auth: 'public' | 'user';
  /**
   * Where the route is served: the platform host (default), a site's host (or
   * `/sites/{schema}/…`), or both. Elsewhere it does not exist (404).
   */
  scope?: 'platform' | 'tenant' | 'both';
  /** `auth`: the login-attempt limit applies (spec §8.2). */
  rateLimit?: 'auth';
  /** `data`: the body may be up to DATA_BODY_LIMIT_BYTES (bulk record writes) instead of BODY_LIMIT_BYTES. */
  bodyLimit?: 'data';
  /**
   * `long`: the service's transaction may run statements up to DATABASE_LONG_STATEMENT_TIMEOUT_MS
   * instead of DATABASE_STATEMENT_TIMEOUT_MS (the service calls allowLongStatements in it).
   */
  statementTimeout?: 'long';
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  /**
   * A request body that is not JSON (`text/csv`): another media type is refused with 415, the
   * body is left unparsed for the handler to stream (`ctx.req`), and OpenAPI documents it.
   */
  rawBody?: { mediaType: string; description: string };
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
  429: 'Rate limit exceeded',
};

export class RouteRegistry {
  readonly routes: RouteDef[] = [];

  add(...defs: RouteDef[]): this {
    this.routes.push(...defs);
    return this;
  }

  /**
   * Mounts every route on a router. Each request runs: the steps (authentication, rate
   * limits, body parsing: `route → authenticate → limit → parse`), the auth requirement, input
   * validation, the handler.
   */
  router(steps: RouteStep[]): Router {
    const router = new Router(ROUTER_OPTIONS);
    const run = async (ctx: AppContext, def: RouteDef) => {
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
      await def.handler(ctx, { params: params as Record<string, string>, query: query as Record<string, unknown>, body });
    };
    // One handler per method and path; it picks the def whose scope serves this host, so one
    // path can have a platform def and a tenant def (`/api/users/`: platform alias, site users).
    const mounted = new Map<string, RouteDef[]>();
    for (const def of this.routes) {
      for (const path of [def.path, ...(def.aliases ?? [])]) {
        const key = `${def.method.toUpperCase()} ${path}`;
        const defs = mounted.get(key);
        if (defs) {
          if (defs.some((d) => scopesOverlap(d, def))) throw new Error(`Route ${key} is declared twice for the same scope (${def.operationId}).`);
          defs.push(def);
          continue;
        }
        const candidates = [def];
        mounted.set(key, candidates);
        router[def.method](path, async (ctx: AppContext) => {
          const chosen = candidates.find((d) => servesHost(d, ctx.state.tenant));
          if (!chosen) throw notFound({ message: `No route matches ${ctx.method} ${ctx.path} on this host.` });
          await run(ctx, chosen);
        });
      }
    }
    return router;
  }

  /** OpenAPI 3.1 document generated from the route schemas. */
  openapi(info: { title: string; version: string; description?: string }, components: Record<string, TSchema>): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    const onPlatform = new Set(this.routes.filter((d) => d.scope !== 'tenant').flatMap((d) => [d.path, ...(d.aliases ?? [])].map((p) => `${d.method} ${p}`)));
    for (const def of this.routes) {
      for (const [i, path] of [def.path, ...(def.aliases ?? [])].entries()) {
        // A site route sharing its path with a platform route is documented in its `/sites/{schema_name}/…` form.
        const prefixed = def.scope === 'tenant' && onPlatform.has(`${def.method} ${path}`);
        const oaPath = (prefixed ? `/sites/:schema_name${path}` : path).replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
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
        const errorStatuses = [...(def.body || def.query || def.params ? [400] : []), ...(def.auth === 'public' ? [] : [401, 403]), ...(def.rawBody ? [413, 415] : []), 429];
        if (/:\w/.test(path)) errorStatuses.push(404);
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
          security: def.auth === 'public' ? [] : [{ bearerAuth: [] }],
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
      components: { schemas, securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
    };
  }
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
