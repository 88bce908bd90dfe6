// Rate limits (spec Part 1 §8.2–8.4). Which set applies where is our choice (the spec is
// silent), written in docs/api-conventions.md:
//   token issue                      auth      20 / hour   per client address
//   any authenticated request        user    1000 / hour   per user
//   authenticated /api/cloud/… route standard 100 / minute per user (also through its aliases)
//   authenticated writes             write     30 / minute per user
//   any anonymous request            anon     100 / hour   per client address
//                                    burst     10 / minute per client address
//   an app's routes on its site      app  rate_limit_per_hour of the app (Part 2 §2), per app
//                                         and caller (user, else client address); 0: none
// Counters live in Redis when REDIS_URL is set (shared by every server process), else in
// process memory. Headers report the tightest limit that applied.
//
// A Redis that fails (refuses, or answers nothing within REDIS_COMMAND_TIMEOUT_MS: main.ts sets
// the client's timeouts) never fails a request: the limit counts in process memory instead
// (rate-limiter-flexible's insuranceLimiter). After a command that took that long, Redis is left
// alone for REDIS_PAUSE_MS (the limits count in memory at once), so a frozen Redis costs one
// request one timeout, not every request one per limit.
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { AppRateLimits } from '../../shared/apps/app-limits.ts';
import type { RateLimitConfig } from '../../shared/config.ts';
import { DomainError } from '../../shared/errors.ts';
import type { RouteDef, RouteStep } from './registry.ts';
import type { AppContext } from './types.ts';

type LimiterName = 'auth' | 'user' | 'standard' | 'write' | 'anon' | 'burst' | 'app';

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** The app routes under the app limit; its settings routes are not (an administrator can always change the limit). */
const APP_ROUTES = '/api/apps/:app_slug/';
const APP_SETTINGS = '/api/apps/:app_slug/settings/';

/** How long Redis is not asked after a command that took REDIS_COMMAND_TIMEOUT_MS. */
export const REDIS_PAUSE_MS = 5_000;

/** A limit's counters: in Redis (falling back to `memory`), and in memory. */
interface Limiter {
  points: number;
  store: RateLimiterAbstract;
  memory: RateLimiterMemory;
}

/** How one limit stands after this request. */
interface Standing {
  limit: number;
  remaining: number;
  msBeforeNext: number;
}

export class RateLimits {
  private readonly limiters: Record<LimiterName, Limiter>;
  private readonly apps: AppRateLimits;
  private readonly commandTimeoutMs: number;
  /** Until when Redis is not asked (a command took commandTimeoutMs). */
  private redisPausedUntil = 0;

  constructor(config: RateLimitConfig, redis: Redis | undefined, apps: AppRateLimits, options: { commandTimeoutMs: number }) {
    const make = (name: LimiterName, points: number, duration: number): Limiter => {
      const keyPrefix = `${config.keyPrefix}:${name}`;
      const memory = new RateLimiterMemory({ keyPrefix, points, duration });
      if (!redis) return { points, store: memory, memory };
      // If Redis becomes unreachable, fall back to per-process counting rather than failing requests.
      return { points, memory, store: new RateLimiterRedis({ storeClient: redis, keyPrefix, points, duration, rejectIfRedisNotReady: true, insuranceLimiter: memory }) };
    };
    this.limiters = {
      auth: make('auth', config.authPerHour, 3600),
      user: make('user', config.userPerHour, 3600),
      standard: make('standard', config.standardPerMinute, 60),
      write: make('write', config.writePerMinute, 60),
      anon: make('anon', config.anonPerHour, 3600),
      burst: make('burst', config.burstPerMinute, 60),
      // Only counts: each app's own limit decides (it can change at any time, the count stays).
      app: make('app', Number.MAX_SAFE_INTEGER, 3600),
    };
    this.apps = apps;
    this.commandTimeoutMs = options.commandTimeoutMs;
  }

  /** Counts one request: in Redis (or memory when it fails), or straight in memory while Redis is paused. */
  private async consume(limiter: Limiter, key: string): Promise<RateLimiterRes> {
    if (limiter.store === limiter.memory || Date.now() < this.redisPausedUntil) return limiter.memory.consume(key);
    const started = Date.now();
    try {
      return await limiter.store.consume(key);
    } finally {
      if (Date.now() - started >= this.commandTimeoutMs) this.redisPausedUntil = Date.now() + REDIS_PAUSE_MS;
    }
  }

  /** Which limits apply is decided by the route the registry chose (`def`), never by the path's text. */
  private applicable(ctx: AppContext, def: RouteDef, who: string | undefined): [LimiterName, string][] {
    const ip = `ip:${ctx.ip}`;
    const out: [LimiterName, string][] = [];
    if (def.rateLimit === 'auth') out.push(['auth', ip]);
    if (who) {
      out.push(['user', who]);
      if (def.path.startsWith('/api/cloud/')) out.push(['standard', who]);
      if (WRITE_METHODS.has(ctx.method)) out.push(['write', who]);
    } else {
      out.push(['anon', ip], ['burst', ip]);
    }
    return out;
  }

  /** The app limit of a request to an app's route on its site: its key and the app's limit. */
  private async appLimit(ctx: AppContext, def: RouteDef, caller: string): Promise<{ key: string; limit: number } | undefined> {
    const schema = ctx.state.tenant;
    const slug = ctx.params.app_slug;
    if (!schema || !slug || !def.path.startsWith(APP_ROUTES) || def.path.startsWith(APP_SETTINGS)) return undefined;
    const limit = await this.apps.limitOf(schema, slug);
    return limit === null ? undefined : { key: `${schema}:${slug}:${caller}`, limit };
  }

  /**
   * A route step: runs after authentication, before body parsing, validation and the handler.
   * Every registry route is limited; probes and docs are other routers and are not.
   */
  step(): RouteStep {
    return async (ctx, def) => {
      const actor = ctx.state.actor;
      const who = actor && (actor.kind === 'user' ? `user:${actor.uuid}` : `system:${actor.name}`);
      const standings: Standing[] = [];
      for (const [name, key] of this.applicable(ctx, def, who)) {
        const limiter = this.limiters[name];
        try {
          const res = await this.consume(limiter, key);
          standings.push({ limit: limiter.points, remaining: res.remainingPoints, msBeforeNext: res.msBeforeNext });
        } catch (rej) {
          if (!(rej instanceof RateLimiterRes)) throw rej;
          this.refuse(ctx, limiter.points, rej.msBeforeNext);
        }
      }
      const app = await this.appLimit(ctx, def, who ?? `ip:${ctx.ip}`);
      if (app) {
        const res = await this.consume(this.limiters.app, app.key);
        if (res.consumedPoints > app.limit) this.refuse(ctx, app.limit, res.msBeforeNext);
        standings.push({ limit: app.limit, remaining: app.limit - res.consumedPoints, msBeforeNext: res.msBeforeNext });
      }
      const tightest = standings.reduce<Standing | undefined>((a, b) => (!a || b.remaining < a.remaining ? b : a), undefined);
      if (tightest) this.setHeaders(ctx, tightest);
    };
  }

  /** The 429 of §8.4, with the headers of the limit that was hit. */
  private refuse(ctx: AppContext, limit: number, msBeforeNext: number): never {
    this.setHeaders(ctx, { limit, remaining: 0, msBeforeNext });
    const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
    ctx.set('Retry-After', String(seconds));
    const text = `Request was throttled. Expected available in ${seconds} second${seconds === 1 ? '' : 's'}.`;
    throw new DomainError('RATE_LIMIT_EXCEEDED', text, { detail: text, extra: { error: 'Too many requests.', retry_after: seconds } });
  }

  private setHeaders(ctx: AppContext, s: Standing): void {
    ctx.set('X-RateLimit-Limit', String(s.limit));
    ctx.set('X-RateLimit-Remaining', String(Math.max(0, s.remaining)));
    ctx.set('X-RateLimit-Reset', String(Math.ceil((Date.now() + s.msBeforeNext) / 1000)));
  }
}
