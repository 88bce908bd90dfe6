import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { CachedLookup } from './cached-lookup.ts';
import { loadConfig, ConfigError } from '../config.ts';
import { nextSlug, slugify } from './slug.ts';
import { pageEnvelope, parsePageRequest, resolvePage } from './pagination.ts';

test('slugify: lowercase words joined by hyphens, accents folded', (t) => {
  t.is(slugify('Hello World'), 'hello-world');
  t.is(slugify('  Ça   va? Très bien!  '), 'ca-va-tres-bien');
  t.is(slugify("Robert'); DROP TABLE--"), 'robert-drop-table');
  t.is(slugify('***'), '');
});

test('nextSlug: -2, -3 … past the highest taken', (t) => {
  t.is(nextSlug('acme', []), 'acme');
  t.is(nextSlug('acme', ['acme']), 'acme-2');
  t.is(nextSlug('acme', ['acme', 'acme-2', 'acme-7', 'acme-corp']), 'acme-8');
});

test('pagination: defaults, clamping, invalid pages, links', (t) => {
  t.deepEqual(parsePageRequest({}), { page: 1, pageSize: 20 });
  t.deepEqual(parsePageRequest({ page: '3', page_size: '500' }), { page: 3, pageSize: 100 });
  t.deepEqual(parsePageRequest({ page_size: 'abc' }), { page: 1, pageSize: 20 });
  for (const page of ['0', '-1', 'x', '1.5']) t.throws(() => parsePageRequest({ page }), undefined, page);
  t.throws(() => resolvePage({ page: 3, pageSize: 10 }, 20));
  t.notThrows(() => resolvePage({ page: 1, pageSize: 10 }, 0));
  t.deepEqual(resolvePage({ page: Number.MAX_SAFE_INTEGER, pageSize: 10 }, 25), { page: 3, pageSize: 10 });
  const env = pageEnvelope({ page: 2, pageSize: 10, count: 25, results: [] }, 'http://h/api/x/?page=2&page_size=10&search=a');
  t.is(env.next, 'http://h/api/x/?page=3&page_size=10&search=a');
  t.is(env.previous, 'http://h/api/x/?page_size=10&search=a');
});

test('config: defaults, and a bad value stops the start naming the variable', (t) => {
  const c = loadConfig({});
  t.like(c, { port: 8000, host: '127.0.0.1', baseDomain: 'localhost', environment: 'production', databaseUrl: undefined });
  t.deepEqual(c.platformHosts, ['localhost', '127.0.0.1']);
  t.is(c.refreshTokenTtlSeconds, 7 * 24 * 3600);
  t.true(c.rateLimit.enabled);
  t.like(c.outbound, { allowHosts: [], allowCidrs: [], allowPorts: [80, 443], timeoutMs: 10_000, maxResponseBytes: 1024 * 1024, maxPerSite: 8 });
  t.deepEqual(c.dnsServers, []);
  t.deepEqual(loadConfig({ OUTBOUND_ALLOW_CIDRS: '10.0.0.0/8, 127.0.0.1,fd00::/8', DNS_SERVERS: '127.0.0.1:5353,[::1]:53,10.0.0.2' }).outbound.allowCidrs, ['10.0.0.0/8', '127.0.0.1', 'fd00::/8']);
  const bad: Record<string, string> = {
    PORT: 'eighty',
    ENVIRONMENT: 'prod',
    DATABASE_URL: 'mysql://x',
    RATE_LIMIT_ENABLED: 'maybe',
    PLATFORM_SECRET_KEY: 'short',
    PLATFORM_BASE_DOMAIN: 'Bad_Domain',
    LOG_LEVEL: 'loud',
    REDIS_URL: 'not a url',
    OUTBOUND_ALLOW_CIDRS: '10.0.0.0/33',
    OUTBOUND_ALLOW_HOSTS: 'bad host',
    OUTBOUND_ALLOW_PORTS: '80,http',
    OUTBOUND_TIMEOUT_MS: '5',
    DNS_SERVERS: 'dns.example.com',
  };
  for (const [name, value] of Object.entries(bad)) {
    const err = t.throws(() => loadConfig({ [name]: value }), { instanceOf: ConfigError });
    t.true(err!.message.startsWith(name), err!.message);
  }
});

test('config: DATABASE_DIRECT_URL means DATABASE_URL is a transaction pooler (named statements off unless asked for)', (t) => {
  const proxy = 'postgres://app@pgbouncer:6432/platform';
  const direct = 'postgres://app@db:5432/platform';
  t.like(loadConfig({ DATABASE_URL: direct }), { databaseDirectUrl: undefined, preparedStatements: true });
  t.like(loadConfig({ DATABASE_URL: proxy, DATABASE_DIRECT_URL: direct }), { databaseUrl: proxy, databaseDirectUrl: direct, preparedStatements: false });
  t.like(loadConfig({ DATABASE_URL: proxy, DATABASE_DIRECT_URL: direct, DATABASE_PREPARED_STATEMENTS: 'true' }), { preparedStatements: true }, 'PgBouncer 1.21+ with max_prepared_statements');
  t.like(loadConfig({ DATABASE_URL: direct, DATABASE_DIRECT_URL: direct }), { databaseDirectUrl: undefined, preparedStatements: true }, 'the same URL: no proxy');
  t.throws(() => loadConfig({ DATABASE_DIRECT_URL: direct }), { instanceOf: ConfigError, message: /^DATABASE_DIRECT_URL needs DATABASE_URL/ });
  t.throws(() => loadConfig({ DATABASE_URL: proxy, DATABASE_DIRECT_URL: 'mysql://x' }), { instanceOf: ConfigError, message: /^DATABASE_DIRECT_URL/ });
});

test('shared/ knows nothing of Koa or oclif', (t) => {
  const root = path.resolve(import.meta.dirname, '..');
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts') && /from ['"](koa|koa-[\w-]+|@koa\/[\w-]+|@oclif\/[\w-]+)['"]/.test(fs.readFileSync(full, 'utf8'))) {
        offenders.push(path.relative(root, full));
      }
    }
  };
  walk(root);
  t.deepEqual(offenders, []);
});

test('CachedLookup: when full, the oldest tenth of the entries goes, not every entry', async (t) => {
  const cache = new CachedLookup<number>({ maxEntries: 20 });
  const load = async (key: string) => Number(key);
  for (let i = 0; i <= 20; i++) await cache.get(String(i), load); // the 21st makes room
  const misses = cache.misses;
  await cache.get('5', load);
  await cache.get('20', load);
  t.is(cache.misses, misses, 'recent entries are still kept');
  await cache.get('0', load);
  await cache.get('1', load);
  t.is(cache.misses, misses + 2, 'the two oldest went');
});
