// The hand-written baseline of `npm run bench:hotpath` (bench/hotpath.ts): the records API of
// the one benchmark table as a skilled engineer would write it for that table — bare Koa (no
// router, no middleware), a `pg` Pool of 20 (the platform's size), the bearer JWT verified in
// process (no database lookup), then exactly ONE SQL statement per request, a named (prepared)
// statement with bound parameters:
//
//   GET  …/data/{id}/        SELECT <columns> FROM <table> WHERE id = $1           → {data}
//   GET  …/data/?age__gte=a&age__lt=b&_sort=-age&page_size=n[&page=p][&_count=none]
//                            the page (a CTE) LEFT JOINed to count(*) under the same WHERE:
//                            page and exact total in one round trip → {data, total, page, page_size}
//                            (`_count=none`: the page alone, total null)
//   POST …/data/  [ … ]      INSERT … SELECT … FROM jsonb_to_recordset($1::jsonb) RETURNING <columns>
//                            → 201 {data: [...]}; the body is JSON.parse'd (an array of at most
//                            10,000, else 400) and sent as the parameter text: no per-field checks
//   POST …/data/  { … }      one record: INSERT … SELECT … FROM jsonb_populate_record(NULL::…, $1::jsonb)
//                            RETURNING <columns> → 201 {data}
//   PATCH …/data/{id}/ {…}   UPDATE … SET each column = coalesce of the body's value (a record of
//                            the body by jsonb_populate_record, the columns it names) WHERE id = $1
//                            RETURNING <columns> → 200 {data}, 404 when absent
//   DELETE …/data/{id}/      DELETE … WHERE id = $1 → 204, 404 when absent
//   GET  /readyz             200 (bench/children.ts waits for it)
//
// Under /sites/{HOTPATH_SCHEMA}/api/apps/{HOTPATH_APP}/datatables/{HOTPATH_TABLE}/data/, the
// physical table "{HOTPATH_SCHEMA}"."{HOTPATH_PHYSICAL}" (flat_table: one column per field).
// The token must be an HS256 access token of issuer `platform` signed with PLATFORM_SECRET_KEY
// whose `tenant` claim is the site's schema (shared/auth/tokens.ts). Rows go out as node-pg
// gives them (bigint parsed to a number, timestamptz to a Date, so JSON has ISO 8601 with `Z`):
// the bodies equal the platform's. Its connections carry application_name `bench-baseline`
// (or PGAPPNAME), so the bench finds its PostgreSQL backends. HOTPATH_UNNAMED=1: the statements
// unnamed (behind a transaction pooler that cannot carry prepared statements: BENCH_PROXY).
import { createSecretKey } from 'node:crypto';
import jwt from 'jsonwebtoken';
import Koa from 'koa';
import pg from 'pg';

const env = (name: string) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;
const SCHEMA = env('HOTPATH_SCHEMA');
const TABLE = `${ident(SCHEMA)}.${ident(env('HOTPATH_PHYSICAL'))}`;
const PREFIX = `/sites/${SCHEMA}/api/apps/${env('HOTPATH_APP')}/datatables/${env('HOTPATH_TABLE')}/data/`;
const COLUMNS = 'id, name, email, age, city, created_at, score';
const TYPED = 'id bigint, name text, email text, age bigint, city text, created_at timestamptz, score double precision';
const MAX_BULK = 10_000;
const MAX_BODY = 16 * 2 ** 20;
/** `_sort` → ORDER BY keys; the key ends it in the last key's direction, as the platform orders. */
const SORTS: Record<string, [string, string][]> = {
  '-age': [['age', 'DESC'], ['id', 'DESC']],
  age: [['age', 'ASC'], ['id', 'ASC']],
  id: [['id', 'ASC']],
  '-id': [['id', 'DESC']],
};
const orderBy = (sort: string, alias = '') => SORTS[sort]!.map(([c, d]) => `${alias}${c} ${d}`).join(', ');

pg.types.setTypeParser(pg.types.builtins.INT8, Number); // ids, ages and counts are far below 2^53
const secret = createSecretKey(Buffer.from(env('PLATFORM_SECRET_KEY'), 'utf8'));
const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 20, application_name: process.env.PGAPPNAME || 'bench-baseline' });

const WHERE = 'age >= $1 AND age < $2';
/** The list statement of a sort, with or without the count (`page+count -age`, `page -age`, …). */
function listStatement(sort: string, count: boolean) {
  const page = `SELECT ${COLUMNS} FROM ${TABLE} WHERE ${WHERE} ORDER BY ${orderBy(sort)} LIMIT $3 OFFSET $4`;
  if (!count) return { name: `page ${sort}`, text: page };
  // One row with a null page when the page is empty: the total still comes back. The outer
  // ORDER BY re-sorts at most page_size rows (a join does not promise to keep the CTE's order).
  return {
    name: `page+count ${sort}`,
    text: `WITH page AS (${page}) SELECT c.total, page.* FROM (SELECT count(*) AS total FROM ${TABLE} WHERE ${WHERE}) c LEFT JOIN page ON true ORDER BY ${orderBy(sort, 'page.')}`,
  };
}
const UNNAMED = process.env.HOTPATH_UNNAMED === '1';
const query = (statement: { name: string; text: string }, values: unknown[]) => pool.query(UNNAMED ? { text: statement.text, values } : { ...statement, values });
const WRITABLE = COLUMNS.split(', ').filter((c) => c !== 'id');
const statements = {
  get: { name: 'get', text: `SELECT ${COLUMNS} FROM ${TABLE} WHERE id = $1` },
  insertOne: { name: 'insert one', text: `INSERT INTO ${TABLE} (${COLUMNS}) SELECT ${COLUMNS} FROM jsonb_to_record($1::jsonb) AS x(${TYPED}) RETURNING ${COLUMNS}` },
  // The columns the body names take its values (`?` tells a key present from a null); the others stay.
  update: {
    name: 'update',
    text: `UPDATE ${TABLE} t SET ${WRITABLE.map((c) => `${c} = CASE WHEN $2::jsonb ? '${c}' THEN x.${c} ELSE t.${c} END`).join(', ')}
             FROM jsonb_to_record($2::jsonb) AS x(${TYPED}) WHERE t.id = $1 RETURNING ${COLUMNS.split(', ').map((c) => `t.${c}`).join(', ')}`,
  },
  delete: { name: 'delete', text: `DELETE FROM ${TABLE} WHERE id = $1` },
  insert: { name: 'insert', text: `INSERT INTO ${TABLE} (${COLUMNS}) SELECT ${COLUMNS} FROM jsonb_to_recordset($1::jsonb) AS x(${TYPED}) RETURNING ${COLUMNS}` },
  list: new Map(Object.keys(SORTS).flatMap((sort) => [true, false].map((count) => [`${sort} ${count}`, listStatement(sort, count)] as const))),
};

function fail(ctx: Koa.Context, status: number, message: string): void {
  ctx.status = status;
  ctx.body = { status: 'error', message };
}

/** A valid access token of this site in the Authorization header. */
function authenticated(ctx: Koa.Context): boolean {
  const header = ctx.get('Authorization');
  if (!header.startsWith('Bearer ')) return false;
  try {
    const claims = jwt.verify(header.slice(7).trim(), secret, { algorithms: ['HS256'], issuer: 'platform' }) as jwt.JwtPayload;
    return claims.token_type === 'access' && claims.tenant === SCHEMA && typeof claims.sub === 'string';
  } catch {
    return false;
  }
}

const int = (raw: unknown): number | undefined => (typeof raw === 'string' && /^\d{1,9}$/.test(raw) ? Number(raw) : undefined);

async function list(ctx: Koa.Context): Promise<void> {
  const q = ctx.query;
  const [gte, lt] = [int(q.age__gte), int(q.age__lt)];
  const sort = typeof q._sort === 'string' ? q._sort : 'id';
  if (gte === undefined || lt === undefined || !SORTS[sort]) return fail(ctx, 400, 'This endpoint serves age__gte, age__lt and _sort of age or id.');
  const pageSize = Math.min(int(q.page_size) || 20, 1000);
  const page = int(q.page) || 1;
  const count = q._count !== 'none';
  const { rows } = await query(statements.list.get(`${sort} ${count}`)!, [gte, lt, pageSize, (page - 1) * pageSize]);
  if (!count) {
    ctx.body = { data: rows, total: null, page, page_size: pageSize };
    return;
  }
  const total = rows[0].total as number;
  const data = rows[0].id === null ? [] : rows.map(({ total: _, ...row }) => row);
  ctx.body = { data, total, page, page_size: pageSize };
}

async function get(ctx: Koa.Context, id: string): Promise<void> {
  if (!/^\d{1,18}$/.test(id)) return fail(ctx, 404, 'Record not found.');
  const { rows } = await query(statements.get, [id]);
  if (!rows[0]) return fail(ctx, 404, 'Record not found.');
  ctx.body = { data: rows[0] };
}

async function readBody(ctx: Koa.Context): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function create(ctx: Koa.Context): Promise<void> {
  const text = await readBody(ctx);
  if (text === null) return fail(ctx, 413, 'Body too large.');
  let records: unknown;
  try {
    records = JSON.parse(text);
  } catch {
    return fail(ctx, 400, 'Invalid JSON.');
  }
  if (records && typeof records === 'object' && !Array.isArray(records)) {
    const { rows } = await query(statements.insertOne, [text]);
    ctx.status = 201;
    ctx.body = { data: rows[0] };
    return;
  }
  if (!Array.isArray(records) || !records.length || records.length > MAX_BULK) return fail(ctx, 400, `Expected an array of 1 to ${MAX_BULK} records.`);
  // The text just parsed is the parameter: PostgreSQL reads it as jsonb (no second JSON.stringify).
  const { rows } = await query(statements.insert, [text]);
  ctx.status = 201;
  ctx.body = { data: rows };
}

async function update(ctx: Koa.Context, id: string): Promise<void> {
  if (!/^\d{1,18}$/.test(id)) return fail(ctx, 404, 'Record not found.');
  const text = await readBody(ctx);
  if (text === null) return fail(ctx, 413, 'Body too large.');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return fail(ctx, 400, 'Invalid JSON.');
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) return fail(ctx, 400, 'Expected an object.');
  const { rows } = await query(statements.update, [id, text]);
  if (!rows[0]) return fail(ctx, 404, 'Record not found.');
  ctx.body = { data: rows[0] };
}

async function remove(ctx: Koa.Context, id: string): Promise<void> {
  if (!/^\d{1,18}$/.test(id)) return fail(ctx, 404, 'Record not found.');
  const { rowCount } = await query(statements.delete, [id]);
  if (!rowCount) return fail(ctx, 404, 'Record not found.');
  ctx.status = 204;
}

const app = new Koa();
app.use(async (ctx) => {
  if (ctx.path === '/readyz' && ctx.method === 'GET') {
    await pool.query('SELECT 1');
    ctx.body = { status: 'ok' };
    return;
  }
  if (!ctx.path.startsWith(PREFIX)) return fail(ctx, 404, 'Not found.');
  if (!authenticated(ctx)) return fail(ctx, 401, 'Authentication failed.');
  const rest = ctx.path.slice(PREFIX.length);
  if (rest === '' && ctx.method === 'GET') return list(ctx);
  if (rest === '' && ctx.method === 'POST') return create(ctx);
  if (rest.endsWith('/') && !rest.slice(0, -1).includes('/')) {
    const id = decodeURIComponent(rest.slice(0, -1));
    if (ctx.method === 'GET') return get(ctx, id);
    if (ctx.method === 'PATCH') return update(ctx, id);
    if (ctx.method === 'DELETE') return remove(ctx, id);
  }
  fail(ctx, 404, 'Not found.');
});
app.on('error', (err: Error) => console.error(err.message));

const server = app.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
server.keepAliveTimeout = 65_000; // as the platform's
const stop = () => {
  server.close();
  server.closeIdleConnections();
  pool.end().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
