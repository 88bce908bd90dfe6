// The bare baseline: the bench's three request paths served by Koa alone (no router, no
// middleware stack, no ORM) over a `pg` Pool, doing the same work as the platform:
// the same SQL (captured from MikroORM's debug log), the same JWT checks, the same argon2
// verification, the same JSON. What the platform spends beyond this is its overhead.
//
//   GET  /api/profile/                   verify bearer JWT → SELECT user by uuid
//   GET  /api/cloud/users/?page_size=N   verify bearer JWT → SELECT user by uuid → count → page
//   POST /api/auth/jwt/token/            SELECT user by lower(username) → argon2 verify →
//                                        UPDATE last_login → sign access + refresh
//
// and, for `npm run bench:records` (bench/records.ts), the records API of a flat_table table
// under /sites/{schema}/api/apps/{app}/datatables/{table}/data/ — the SQL of
// shared/data/records.service.ts and the lookups before it:
//
//   GET …/data/?field__op=v&_sort=-f&page_size=N   verify the site's bearer JWT → SELECT the site
//                                        user → SELECT app → SELECT data table → count → page
//   GET …/data/{id}/                     the same authentication and lookups → SELECT one row
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
  const pageSize = Math.min(Number(ctx.query.page_size) || 20, 100);
  const page = Math.max(Number(ctx.query.page) || 1, 1);
  // Staff and superusers see every user; others themselves (the platform's CASL rule).
  const [where, params] = user.is_staff || user.is_superuser ? ['is_deleted = false', []] : ['is_deleted = false AND uuid = $1', [user.uuid]];
  const count = Number((await pool.query<{ count: string }>(`SELECT count(*) AS count FROM users WHERE ${where}`, params)).rows[0].count);
  if (page > 1 && (page - 1) * pageSize >= count) return fail(ctx, 404, 'Invalid page.');
  const offset = (page - 1) * pageSize;
  const { rows } = await pool.query<UserRow>(
    `SELECT ${COLUMNS} FROM users WHERE ${where} ORDER BY date_joined ASC, uuid ASC LIMIT ${pageSize}${offset ? ` OFFSET ${offset}` : ''}`,
    params,
  );
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
    results: rows.map(view),
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

// ---- Records of a flat_table table (bench/records.ts) ----

const TENANT_USER = (q: string) =>
  `SELECT u."uuid", u."username", u."email", u."first_name", u."last_name", u."is_deleted", u."is_staff", u."is_superuser", u."date_joined", u."modified", u."last_login", ` +
  `u.is_active AND (u.platform_user_uuid IS NULL OR coalesce(p.is_active AND NOT p.is_deleted, false)) AS is_active, ` +
  `u.token_generation + coalesce(p.token_generation, 0) AS token_generation FROM ${q}.users u LEFT JOIN public.users p ON p.uuid = u.platform_user_uuid WHERE u.uuid = $1`;
const TABLE_ROW = (q: string) => `
  SELECT t.id, t.app_id, t.data_source_id, d.name AS datasource_name, d.slug AS datasource_slug, d.provider_type,
         a.name AS app_name, a.slug AS app_slug, t.name, t.description, t.json_schema, t.schema_hash, t.physical_table_name,
         t.is_materialized, t.is_active, t.is_reference, t.source_table_id,
         s.id AS src_id, sa.slug AS src_app, s.name AS src_name, s.physical_table_name AS src_physical,
         t.created_at, t.updated_at, t.created_by, t.modified_by
    FROM ${q}.data_tables t
    JOIN ${q}.data_sources d ON d.id = t.data_source_id
    JOIN ${q}.apps a ON a.id = t.app_id
    LEFT JOIN ${q}.data_tables s ON s.id = t.source_table_id
    LEFT JOIN ${q}.apps sa ON sa.id = s.app_id WHERE t.app_id = $1 AND t.name = $2`;
const RECORDS_PATH = /^\/sites\/([a-z_][a-z0-9_]{0,62})\/api\/apps\/([a-z0-9-]+)\/datatables\/([A-Za-z_][A-Za-z0-9_]{0,62})\/data\/(?:([^/]+)\/)?$/;
const PG_TYPES: Record<string, string> = { string: 'text', integer: 'bigint', number: 'double precision', boolean: 'boolean', date: 'date', datetime: 'timestamptz' };
const OPS: Record<string, string> = { eq: '=', gt: '>', gte: '>=', lt: '<', lte: '<=' };
const ident = (name: string) => {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) throw new Error(`bad identifier ${name}`);
  return `"${name}"`;
};

interface RecordsTable {
  table: string;
  types: Map<string, string>;
  pk: string[];
}

/** Authentication on the site and the table's row: what the platform does before the records SQL. */
async function recordsTable(ctx: Koa.Context, schema: string, appSlug: string, name: string): Promise<RecordsTable | null> {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('Authorization'));
  let claims: jwt.JwtPayload | undefined;
  try {
    claims = match ? (jwt.verify(match[1], secret, { algorithms: ['HS256'], issuer: ISSUER }) as jwt.JwtPayload) : undefined;
  } catch {
    claims = undefined;
  }
  if (!claims || claims.token_type !== 'access' || claims.tenant !== schema || typeof claims.sub !== 'string') {
    fail(ctx, 401, 'Authentication failed.');
    return null;
  }
  const q = ident(schema);
  const user = (await pool.query<UserRow>(TENANT_USER(q), [claims.sub])).rows[0];
  if (!user || !user.is_active || user.is_deleted || user.token_generation !== claims.gen) {
    fail(ctx, 401, 'Authentication failed.');
    return null;
  }
  const app = (await pool.query<{ id: number }>(`SELECT id, name, slug FROM ${q}.apps WHERE slug = $1 AND is_active`, [appSlug])).rows[0];
  const row = app && (await pool.query(TABLE_ROW(q), [app.id, name])).rows[0];
  if (!row || row.provider_type !== 'flat_table' || !row.is_materialized) {
    fail(ctx, 404, 'Not found.');
    return null;
  }
  const schemaDoc = row.json_schema as { fields: { name: string; type: string }[]; primaryKey?: string[] };
  return {
    table: `${q}.${ident(row.src_physical ?? row.physical_table_name)}`,
    types: new Map(schemaDoc.fields.map((f) => [f.name, PG_TYPES[f.type] ?? 'jsonb'])),
    pk: schemaDoc.primaryKey ?? ['id'],
  };
}

/** Timestamps as ISO strings (to_jsonb gives `+00:00` offsets), as the platform answers. */
function plainRow(t: RecordsTable, r: Record<string, unknown>): Record<string, unknown> {
  for (const [field, type] of t.types) if (type === 'timestamptz' && typeof r[field] === 'string') r[field] = new Date(r[field] as string).toISOString();
  return r;
}

async function listRecords(ctx: Koa.Context, t: RecordsTable): Promise<void> {
  const conds: string[] = [];
  const params: unknown[] = [];
  for (const [key, raw] of Object.entries(ctx.query)) {
    if (['page', 'page_size', '_sort'].includes(key)) continue;
    const [field, op = 'eq'] = key.split('__');
    const type = t.types.get(field);
    if (!type || !OPS[op] || typeof raw !== 'string') return fail(ctx, 400, `Unsupported condition ${key}.`);
    params.push(type === 'bigint' || type === 'double precision' ? Number(raw) : raw);
    conds.push(`t.${ident(field)} ${OPS[op]} $${params.length}::${type}`);
  }
  const where = conds.length ? `(${conds.join(' AND ')})` : 'TRUE';
  const pageSize = Math.min(Number(ctx.query.page_size) || 20, 1000);
  const page = Math.max(Number(ctx.query.page) || 1, 1);
  const keys: string[] = [];
  const sort = typeof ctx.query._sort === 'string' && ctx.query._sort ? ctx.query._sort.split(',') : [];
  for (const part of sort) keys.push(`t.${ident(part.replace(/^-/, ''))} ${part.startsWith('-') ? 'DESC' : 'ASC'}`);
  const last = sort.at(-1)?.startsWith('-') ? 'DESC' : 'ASC'; // the key follows the last sort key's direction
  for (const k of t.pk) if (!sort.some((p) => p.replace(/^-/, '') === k)) keys.push(`t.${ident(k)} ${last}`);
  const total = Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${t.table} t WHERE ${where}`, params)).rows[0].n);
  const n = params.length;
  const { rows } = await pool.query<{ r: Record<string, unknown> }>(
    `SELECT to_jsonb(t) AS r FROM ${t.table} t WHERE ${where} ORDER BY ${keys.join(', ')} LIMIT $${n + 1} OFFSET $${n + 2}`,
    [...params, pageSize, (page - 1) * pageSize],
  );
  ctx.body = { data: rows.map((x) => plainRow(t, x.r)), total, page, page_size: pageSize };
}

async function getRecord(ctx: Koa.Context, t: RecordsTable, id: string): Promise<void> {
  const key = t.pk[0]!;
  const type = t.types.get(key)!;
  const { rows } = await pool.query<{ r: Record<string, unknown> }>(`SELECT to_jsonb(t) AS r FROM ${t.table} t WHERE t.${ident(key)} = $1::${type}`, [
    type === 'bigint' ? Number(id) : id,
  ]);
  if (!rows[0]) return fail(ctx, 404, 'Record not found.');
  ctx.body = { data: plainRow(t, rows[0].r) };
}

async function records(ctx: Koa.Context, m: RegExpExecArray): Promise<void> {
  const t = await recordsTable(ctx, m[1]!, m[2]!, m[3]!);
  if (!t) return;
  return m[4] === undefined ? listRecords(ctx, t) : getRecord(ctx, t, decodeURIComponent(m[4]));
}

const app = new Koa();
app.use(async (ctx) => {
  const route = `${ctx.method} ${ctx.path}`;
  if (route === 'GET /api/profile/') return profile(ctx);
  if (route === 'GET /api/cloud/users/') return listUsers(ctx);
  if (route === 'POST /api/auth/jwt/token/') return issueTokens(ctx);
  const recordsPath = ctx.method === 'GET' ? RECORDS_PATH.exec(ctx.path) : null;
  if (recordsPath) return records(ctx, recordsPath);
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
