import fs from 'node:fs';
import http from 'node:http';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
// Black-box HTTP test harness: a real server listening on a real socket, on a database of
// its own. `api()` is a small fetch wrapper returning status, headers and parsed body.
import { createLogger, type Logger } from '../../shared/common/logger.ts';
import { loadConfig, type Config } from '../../shared/config.ts';
import type { BoundConnection } from '../../shared/db/driver.ts';
import { createTestDatabase, type TestDatabase } from '../../shared/testing/database.ts';
import { startServer, type ServerHandle, type StartOptions } from '../main.ts';

export const ADMIN = { username: 'root', password: 'root-password-1', email: 'root@example.com' };
export const TEST_SECRET = 'test-secret-key-0123456789abcdef-0123456789';

export interface TestServer {
  url: string;
  handle: ServerHandle;
  db: TestDatabase;
  config: Config;
  api: (method: string, path: string, options?: RequestOptions) => Promise<ApiResponse>;
  login: (username?: string, password?: string) => Promise<{ access: string; refresh: string }>;
  close: () => Promise<void>;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  raw?: string | Buffer;
  headers?: Record<string, string>;
  /** The Host header (tenant routing); defaults to the server's address. */
  host?: string;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
  /** The body's bytes as they came (downloads). */
  bytes: Buffer;
}

/** The platform's logger at `info`, keeping every line (one entry per line) instead of writing to stdout. */
export function capturingLog(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  return { log: createLogger('info', { destination }), lines };
}

export async function request(base: string, method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.Authorization = `Bearer ${options.token}`;
  if (options.host) headers.Host = options.host;
  let body: string | Buffer | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  if (body !== undefined) headers['Content-Length'] = String(Buffer.byteLength(body));
  const url = new URL(path, base);
  const { status, rawHeaders, bytes } = await new Promise<{ status: number; rawHeaders: string[]; bytes: Buffer }>((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, rawHeaders: res.rawHeaders, bytes: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
  const responseHeaders = new Headers();
  for (let i = 0; i < rawHeaders.length; i += 2) responseHeaders.append(rawHeaders[i], rawHeaders[i + 1]);
  const text = bytes.toString('utf8');
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status, headers: responseHeaders, body: parsed, text, bytes };
}

/**
 * CI provides Redis and Debian's chromium (.ci/run starts or installs them, exports
 * TEST_REDIS_URL and CI=true): there a test that needs one fails when it is missing. Elsewhere
 * such a test may skip, saying why.
 */
export const IN_CI = Boolean(process.env.CI) && process.env.CI !== 'false';
export const REDIS_REQUIRED = IN_CI;

/** Debian's chromium for the browser tests (playwright-core drives it; no browser download). */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
/** Null when the browser is there; else why its tests skip (outside CI; in CI, where .ci/run installs it, they run and fail). */
export const chromiumMissing = fs.existsSync(CHROMIUM) ? null : ` (skipped: no browser at ${CHROMIUM}; apt-get install chromium, or set CHROMIUM_PATH)`;
/** Whether browser tests run here. */
export const BROWSER_TESTS = !chromiumMissing || IN_CI;

/**
 * Redis for the tests that share counters: TEST_REDIS_URL, else redis://127.0.0.1:6379, when it
 * answers PING; otherwise `missing` says why.
 */
export async function testRedis(): Promise<{ url: string; missing?: undefined } | { url?: undefined; missing: string }> {
  const url = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  let cause: Error | undefined;
  redis.on('error', (err: Error) => (cause ??= err));
  try {
    await redis.connect();
    await redis.ping();
    return { url };
  } catch (err) {
    const why = (cause ?? (err as Error)).message.replace(/\.$/, '');
    return { missing: `no Redis answers at ${url} (${why})${process.env.TEST_REDIS_URL ? '' : '; set TEST_REDIS_URL'}` };
  } finally {
    redis.disconnect();
  }
}

/** Starts a server on a fresh database. `env` overrides the test defaults (rate limits off). */
export async function startTestServer(env: Record<string, string> = {}, options: StartOptions = {}): Promise<TestServer> {
  const db = await createTestDatabase();
  const config = loadConfig({
    DATABASE_URL: db.url,
    PORT: '0',
    HOST: '127.0.0.1',
    PLATFORM_SECRET_KEY: TEST_SECRET,
    PLATFORM_ADMIN_USERNAME: ADMIN.username,
    PLATFORM_ADMIN_PASSWORD: ADMIN.password,
    PLATFORM_ADMIN_EMAIL: ADMIN.email,
    PLATFORM_DATA_DIR: '/nonexistent-data-dir',
    RATE_LIMIT_ENABLED: 'false',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    FUNCTION_PREWARM: 'false',
    // Storage upkeep refreshes every bucket's usage 30 s after start: a test that shows usage
    // would see it or not by the machine's speed. Tests of the job itself set it.
    STORAGE_MAINTENANCE_INTERVAL_MS: '0',
    ...env,
  });
  const handle = await startServer(config, { announce: () => undefined, ...options });
  // TEST_SITES_ON_CLUSTER=1: every site made through the services goes to a second cluster (a
  // database of its own; the primary drained), so that a suite shows what a site there does.
  const second = process.env.TEST_SITES_ON_CLUSTER === '1' ? await createTestDatabase('cluster') : undefined;
  if (second) {
    const { addCluster, setClusterState } = await import('../../shared/db/clusters.ts');
    await addCluster(handle.db.orm.em.fork(), handle.db.directUrl, { name: 'second', url: second.url });
    await setClusterState(handle.db.orm.em.fork(), 'primary', 'draining');
  }
  const api = (method: string, path: string, options?: RequestOptions) => request(handle.url, method, path, options);
  return {
    url: handle.url,
    handle,
    db,
    config,
    api,
    async login(username = ADMIN.username, password = ADMIN.password) {
      const res = await api('POST', '/api/auth/jwt/token/', { body: { username, password } });
      if (res.status !== 200) throw new Error(`login failed: ${res.status} ${res.text}`);
      return res.body;
    },
    async close() {
      await handle.close();
      await db.drop();
      await second?.drop();
    },
  };
}

/**
 * The statements and transactions the server sends while a request runs, counted on its ORM
 * connection (issue 33: the write path's round trips). `fewest(run)`: the run of three that sent
 * the fewest statements, as the counter also sees the server's background jobs (a queue's poll).
 * `restore()` when done.
 */
export function statementCounter(server: TestServer) {
  const connection = server.handle.db.orm.em.getConnection() as BoundConnection;
  const begin = connection.begin.bind(connection);
  let transactions = 0;
  connection.begin = (...args) => {
    transactions++;
    return begin(...args);
  };
  const counted = async <T>(run: () => Promise<T>): Promise<{ statements: number; transactions: number; result: T }> => {
    const [before, began] = [connection.statements, transactions];
    const result = await run();
    return { statements: connection.statements - before, transactions: transactions - began, result };
  };
  return {
    counted,
    /**
     * The run of three that sent the fewest statements: each starts 25 ms after the one before
     * answered, so that what the last one set off after its answer (the change announcer's NOTIFY,
     * 5 ms on: realtime/announce.ts) is not counted as the next one's; a background job's
     * statement may still fall in one window.
     */
    async fewest<T>(run: (i: number) => Promise<T>): Promise<{ statements: number; transactions: number; result: T }> {
      const runs = [];
      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setTimeout(r, 25));
        runs.push(await counted(() => run(i)));
      }
      return runs.reduce((a, b) => (b.statements < a.statements ? b : a));
    },
    restore: () => void (connection.begin = begin),
  };
}
