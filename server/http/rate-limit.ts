// Rate limits (spec Part 1 §8.2–8.4). Which set applies where is our choice (the spec is
// silent), written in docs/api-conventions.md:
//   token issue                      auth      20 / hour   per client address
//   any authenticated request        user    1000 / hour   per user
//   authenticated /api/cloud/… route standard 100 / minute per user (also through its aliases)
//   authenticated writes             write     30 / minute per user
//   any anonymous request            anon     100 / hour   per client address
//                                    burst     10 / minute per client address
// Counters live in Redis when REDIS_URL is set (shared by every server process), else in
// process memory. Headers report the tightest limit that applied.
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { RateLimitConfig } from '../../shared/config.ts';
import { DomainError } from '../../shared/errors.ts';
import type { RouteDef, RouteStep } from './registry.ts';
import type { AppContext } from './types.ts';

type LimiterName = 'auth' | 'user' | 'standard' | 'write' | 'anon' | 'burst';

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export class RateLimits {
  private readonly limiters: Record<LimiterName, RateLimiterAbstract>;

  constructor(config: RateLimitConfig, redis: Redis | undefined) {
    const make = (name: LimiterName, points: number, duration: number): RateLimiterAbstract => {
      const keyPrefix = `${config.keyPrefix}:${name}`;
      const memory = new RateLimiterMemory({ keyPrefix, points, duration });
      if (!redis) return memory;
      // If Redis becomes unreachable, fall back to per-process counting rather than failing requests.
      return new RateLimiterRedis({ storeClient: redis, keyPrefix, points, duration, rejectIfRedisNotReady: true, insuranceLimiter: memory });
    };
    this.limiters = {
      auth: make('auth', config.authPerHour, 3600),
      user: make('user', config.userPerHour, 3600),
      standard: make('standard', config.standardPerMinute, 60),
      write: make('write', config.writePerMinute, 60),
      anon: make('anon', config.anonPerHour, 3600),
      burst: make('burst', config.burstPerMinute, 60),
    };
  }

  /** Which limits apply is decided by the route the registry chose (`def`), never by the path's text. */
  private applicable(ctx: AppContext, def: RouteDef): [LimiterName, string][] {
    const actor = ctx.state.actor;
    const ip = `ip:${ctx.ip}`;
    const out: [LimiterName, string][] = [];
    if (def.rateLimit === 'auth') out.push(['auth', ip]);
    if (actor) {
      const who = actor.kind === 'user' ? `user:${actor.uuid}` : `system:${actor.name}`;
      out.push(['user', who]);
      if (def.path.startsWith('/api/cloud/')) out.push(['standard', who]);
      if (WRITE_METHODS.has(ctx.method)) out.push(['write', who]);
    } else {
      out.push(['anon', ip], ['burst', ip]);
    }
    return out;
  }

  /**
   * A route step: runs after authentication, before body parsing, validation and the handler.
   * Every registry route is limited; probes and docs are other routers and are not.
   */
  step(): RouteStep {
    return async (ctx, def) => {
      let tightest: { name: LimiterName; res: RateLimiterRes } | undefined;
      for (const [name, key] of this.applicable(ctx, def)) {
        const limiter = this.limiters[name];
        try {
          const res = await limiter.consume(key);
          if (!tightest || res.remainingPoints < tightest.res.remainingPoints) tightest = { name, res };
        } catch (rej) {
          if (!(rej instanceof RateLimiterRes)) throw rej;
          this.setHeaders(ctx, limiter.points, 0, rej.msBeforeNext);
          const seconds = Math.max(1, Math.ceil(rej.msBeforeNext / 1000));
          ctx.set('Retry-After', String(seconds));
          const text = `Request was throttled. Expected available in ${seconds} second${seconds === 1 ? '' : 's'}.`;
          throw new DomainError('RATE_LIMIT_EXCEEDED', text, { detail: text, extra: { error: 'Too many requests.', retry_after: seconds } });
        }
      }
      if (tightest) this.setHeaders(ctx, this.limiters[tightest.name].points, tightest.res.remainingPoints, tightest.res.msBeforeNext);
    };
  }

  private setHeaders(ctx: AppContext, limit: number, remaining: number, msBeforeNext: number): void {
    ctx.set('X-RateLimit-Limit', String(limit));
    ctx.set('X-RateLimit-Remaining', String(Math.max(0, remaining)));
    ctx.set('X-RateLimit-Reset', String(Math.ceil((Date.now() + msBeforeNext) / 1000)));
  }
}
