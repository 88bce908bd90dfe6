// The bare baseline of `npm run bench:auth` (bench/auth.ts): its three request paths as a skilled
// engineer would write them by hand — Koa alone (no router, no middleware stack, no ORM) over a
// `pg` Pool of 20 (the platform's size), answering the same JSON as the platform, with the same
// checks (JWT, active user of the token's generation, argon2). What the platform spends beyond
// this is its overhead.
//
//   GET  /api/profile/                   verify bearer JWT → SELECT the user by uuid (one query)
//   GET  /api/cloud/users/?page_size=N   verify bearer JWT → SELECT the user by uuid → ONE
//                                        statement for the page and its total (count(*) LEFT
//                                        JOINed to the page)
//   POST /api/auth/jwt/token/            SELECT user by lower(username) → argon2 verify →
//                                        UPDATE last_login → sign access + refresh
//
// The records API's baseline is bench/hotpath-baseline.ts (`npm run bench:hotpath`).
import { createSecretKey, randomUUID } from 'node:crypto';
import { verify } from '@node-rs/argon2';
import jwt from 'jsonwebtoken';
import Koa from 'koa';
import pg from 'pg';

// A KeyObject made once, as the platform does (a string secret costs a PEM parse per call).
const secret = createSecretKey(Buffer.from(process.env.PLATFORM_SECRET_KEY!, 'utf8'));
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 }); // the platform's pool size
const ISSUER = 'platform';
const COLUMNS =
  'uuid, username, email, first_name, last_name, is_active, is_deleted, is_staff, is_superuser, pending_email, token_generation, date_joined, modified, last_login';

interface UserRow {
  uuid: string;
  username: string;
  email: string;
  first_name: string;
  last_name: string;
  is_active: boolean;
  is_deleted: boolean;
  is_staff: boolean;
  is_superuser: boolean;
  pending_email: string;
  token_generation: number;
  date_joined: Date;
  modified: Date;
  last_login: Date | null;
}

const view = (u: UserRow) => ({
  uuid: u.uuid,
  username: u.username,
  email: u.email,
  first_name: u.first_name,
  last_name: u.last_name,
  is_active: u.is_active,
  is_deleted: u.is_deleted,
  is_staff: u.is_staff,
  is_superuser: u.is_superuser,
  date_joined: u.date_joined.toISOString(),
  modified: u.modified.toISOString(),
  last_login: u.last_login ? u.last_login.toISOString() : null,
  pending_email: u.pending_email,
});

function fail(ctx: Koa.Context, status: number, message: string): void {
  ctx.status = status;
  ctx.body = { status: 'error', message };
}

/** The bearer token's user, still active and of the token's generation; null otherwise. */
async function authenticate(ctx: Koa.Context): Promise<UserRow | null> {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('Authorization'));
  if (!match) return null;
  let claims: jwt.JwtPayload;
  try {
    claims = jwt.verify(match[1], secret, { algorithms: ['HS256'], issuer: ISSUER }) as jwt.JwtPayload;
  } catch {
    return null;
  }
  if (claims.token_type !== 'access' || claims.tenant !== null || typeof claims.sub !== 'string') return null;
  const { rows } = await pool.query<UserRow>(`SELECT ${COLUMNS} FROM users WHERE uuid = $1 LIMIT 1`, [claims.sub]);
  const user = rows[0];
  if (!user || !user.is_active || user.is_deleted || user.token_generation !== claims.gen) return null;
  return user;
}

async function profile(ctx: Koa.Context): Promise<void> {
  const user = await authenticate(ctx);
  if (!user) return fail(ctx, 401, 'Authentication failed.');
  ctx.body = view(user);
}

async function listUsers(ctx: Koa.Context): Promise<void> {
  const user = await authenticate(ctx);
  if (!user) return fail(ctx, 401, 'Authentication failed.');
  const pageSize = Math.min(Math.max(Math.trunc(Number(ctx.query.page_size)) || 20, 1), 100);
  const page = Math.max(Math.trunc(Number(ctx.query.page)) || 1, 1);
  // Staff and superusers see every user; others themselves (the platform's CASL rule).
  const [where, params]: [string, unknown[]] = user.is_staff || user.is_superuser ? ['is_deleted = false', []] : ['is_deleted = false AND uuid = $1', [user.uuid]];
  const offset = (page - 1) * pageSize;
  const n = params.length;
  // The page and the number of rows in one round trip: one row with a null page when the page is
  // empty (the count still comes back); the outer ORDER BY re-sorts at most page_size rows.
  const { rows } = await pool.query<UserRow & { total: string }>(
    `WITH page AS (SELECT ${COLUMNS} FROM users WHERE ${where} ORDER BY date_joined ASC, uuid ASC LIMIT $${n + 1} OFFSET $${n + 2})
     SELECT c.total, page.* FROM (SELECT count(*) AS total FROM users WHERE ${where}) c LEFT JOIN page ON true
      ORDER BY page.date_joined ASC, page.uuid ASC`,
    [...params, pageSize, offset],
  );
  const count = Number(rows[0]!.total);
  if (page > 1 && offset >= count) return fail(ctx, 404, 'Invalid page.');
  const link = (n: number) => {
    const url = new URL(`${ctx.protocol}://${ctx.host}${ctx.originalUrl}`);
    if (n === 1) url.searchParams.delete('page');
    else url.searchParams.set('page', String(n));
    return url.toString();
  };
  ctx.body = {
    count,
    next: page * pageSize < count ? link(page + 1) : null,
    previous: page > 1 ? link(page - 1) : null,
    results: rows[0]!.uuid === null ? [] : rows.map(view),
  };
}

async function readJson(req: Koa.Request['req']): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
}

async function issueTokens(ctx: Koa.Context): Promise<void> {
  const body = await readJson(ctx.req);
  if (typeof body.username !== 'string' || typeof body.password !== 'string') return fail(ctx, 400, 'username and password are required.');
  const { rows } = await pool.query<{ uuid: string; password: string; is_active: boolean; token_generation: number }>(
    'SELECT uuid, password, is_active, token_generation FROM users WHERE lower(username) = lower($1) AND NOT is_deleted LIMIT 1',
    [body.username.trim()],
  );
  const user = rows[0];
  const ok = user ? await verify(user.password, body.password).catch(() => false) : false;
  if (!ok || !user.is_active) return fail(ctx, 401, 'No active account found with the given credentials.');
  await pool.query('UPDATE users SET last_login = now(), modified = now() WHERE uuid = $1', [user.uuid]);
  const sign = (type: 'access' | 'refresh', ttl: number) =>
    jwt.sign({ token_type: type, gen: user.token_generation, tenant: null }, secret, {
      algorithm: 'HS256',
      expiresIn: ttl,
      subject: user.uuid,
      jwtid: randomUUID(),
      issuer: ISSUER,
    });
  ctx.body = { access: sign('access', 15 * 60), refresh: sign('refresh', 7 * 24 * 3600) };
}

const app = new Koa();
app.use(async (ctx) => {
  const route = `${ctx.method} ${ctx.path}`;
  if (route === 'GET /api/profile/') return profile(ctx);
  if (route === 'GET /api/cloud/users/') return listUsers(ctx);
  if (route === 'POST /api/auth/jwt/token/') return issueTokens(ctx);
  if (route === 'GET /readyz') {
    await pool.query('SELECT 1');
    ctx.body = { status: 'ok' };
    return;
  }
  fail(ctx, 404, 'Not found.');
});

const server = app.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
server.keepAliveTimeout = 65_000; // as the platform's
const stop = () => {
  server.close();
  server.closeIdleConnections();
  pool.end().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
