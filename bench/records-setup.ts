// The records benches' setup (`npm run bench:records`, `npm run bench:hotpath`), not measured:
// the environment of the server children, and the benchmark table over the platform's own
// HTTP API — the platform admin signs in, creates an organization (becoming its owner) and a
// site, signs in on the site (the owner is seeded as the site's superuser), creates an app,
// a flat_table data source and a table `people` (id integer primary key, name, email, age
// with an index, city, created_at, score) and materializes it. The rows then go straight into
// the physical table with one INSERT … SELECT over generate_series (deterministic values from
// hashint4), followed by VACUUM ANALYZE (visibility map and statistics, as a table that has
// lived a while has them).
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** A non-negative number from the environment (else `def`). */
export const envNumber = (name: string, def: number) => {
  const v = Number(process.env[name] || def);
  if (!Number.isFinite(v) || v < 0) throw new Error(`${name} must be a non-negative number`);
  return v;
};
export const r2 = (n: number) => Math.round(n * 100) / 100;

export const ADMIN = { username: 'benchadmin', password: 'bench-admin-password' };
export const APP = 'bench';
export const TABLE = 'people';
/** The list page of both benches: an indexed range (≈ 3 % of the rows), sorted, 20 a page. */
export const FILTER = 'age__gte=30&age__lt=32&_sort=-age&page_size=20';

export const SCHEMA = {
  title: 'People',
  fields: [
    { name: 'id', type: 'integer', constraints: { required: true, minimum: 1 } },
    { name: 'name', type: 'string', constraints: { required: true, maxLength: 200 } },
    { name: 'email', type: 'string', format: 'email' },
    { name: 'age', type: 'integer', constraints: { minimum: 0, maximum: 150 } },
    { name: 'city', type: 'string' },
    { name: 'created_at', type: 'datetime' },
    { name: 'score', type: 'number' },
  ],
  primaryKey: ['id'],
  indexes: [{ name: 'age', fields: ['age'] }],
};
export const CITIES = ['Paris', 'Berlin', 'Madrid', 'Rome', 'Lisbon', 'Vienna', 'Prague', 'Warsaw', 'Dublin', 'Oslo'];

/** The environment of a server child on the bench database (rate limits off, quiet logs). */
export function serverEnv(databaseUrl: string, secret: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: databaseUrl,
    PLATFORM_SECRET_KEY: secret,
    PLATFORM_ADMIN_USERNAME: ADMIN.username,
    PLATFORM_ADMIN_PASSWORD: ADMIN.password,
    PLATFORM_BASE_DOMAIN: 'bench.localhost',
    PLATFORM_DATA_DIR: path.join(os.tmpdir(), 'platform-bench-data'), // unused with DATABASE_URL and a secret set
    RATE_LIMIT_ENABLED: 'false',
    LOG_LEVEL: 'warn',
  };
}

export interface ApiResult {
  status: number;
  body: Record<string, any>;
  text: string;
}

export async function api(url: string, method: string, init: { token?: string; body?: unknown; raw?: string } = {}): Promise<ApiResult> {
  const body = init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body));
  const res = await fetch(url, {
    method,
    headers: { ...(init.token ? { authorization: `Bearer ${init.token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body,
  });
  const text = await res.text();
  let parsed: Record<string, any> = {};
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, text };
}

export const ok = (res: ApiResult, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${res.text.slice(0, 500)}`);
  return (res.body.data ?? res.body) as Record<string, any>;
};

/** A fresh access token of the site's superuser (tokens live 15 minutes: one per scenario). */
export async function siteToken(base: string, site: string): Promise<string> {
  return ok(await api(`${base}/sites/${site}/api/auth/jwt/token/`, 'POST', { body: ADMIN }), 200, 'site admin login').access as string;
}

/** Site, site admin token, app, data source, table, materialized — all over the platform's HTTP API. */
export async function setupTable(base: string): Promise<{ site: string; token: string; physical: string }> {
  const admin = ok(await api(`${base}/api/auth/jwt/token/`, 'POST', { body: ADMIN }), 200, 'admin login');
  const org = ok(await api(`${base}/api/cloud/organizations/`, 'POST', { token: admin.access, body: { name: 'Records Bench' } }), 201, 'organization');
  const site = ok(await api(`${base}/api/cloud/organizations/${org.slug}/sites/`, 'POST', { token: admin.access, body: { name: 'Records Bench' } }), 201, 'site');
  const siteBase = `${base}/sites/${site.schema_name}`;
  // The organization's owner is seeded as the site's superuser; it signs in with its platform password.
  const token = await siteToken(base, site.schema_name as string);
  const app = ok(await api(`${siteBase}/api/apps/`, 'POST', { token, body: { name: 'Bench' } }), 201, 'app');
  assert.equal(app.slug, APP);
  ok(await api(`${siteBase}/api/apps/${APP}/datasources/`, 'POST', { token, body: { name: 'Main', slug: 'main', provider_type: 'flat_table' } }), 201, 'data source');
  ok(await api(`${siteBase}/api/apps/${APP}/datasources/main/datatables/`, 'POST', { token, body: { name: TABLE, json_schema: SCHEMA } }), 201, 'data table');
  const table = ok(await api(`${siteBase}/api/apps/${APP}/datatables/${TABLE}/materialize/`, 'POST', { token }), 200, 'materialize');
  return { site: site.schema_name as string, token, physical: table.physical_table_name as string };
}

/** `rows` rows straight into the physical table (`"schema"."table"`): one statement, then VACUUM ANALYZE. */
export async function seedRows(url: string, table: string, rows: number): Promise<{ rows: number; seconds: number; tableMiB: number; indexesMiB: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const t0 = performance.now();
    const cities = `ARRAY[${CITIES.map((c) => `'${c}'`).join(', ')}]`;
    await client.query(
      `INSERT INTO ${table} (id, name, email, age, city, created_at, score)
       SELECT i, 'Person ' || i, 'person' || i || '@example.com',
              18 + (hashint4(i) & 2147483647) % 63,
              (${cities})[1 + (hashint4(i + 7) & 2147483647) % ${CITIES.length}],
              timestamptz '2020-01-01 00:00:00+00' + i * interval '1 minute',
              ((hashint4(i + 13) & 2147483647) % 100000) / 100.0
         FROM generate_series(1, $1::int) AS i`,
      [rows],
    );
    await client.query(`VACUUM ANALYZE ${table}`);
    const seconds = r2((performance.now() - t0) / 1000);
    const { rows: r } = await client.query<{ n: number; t: string; i: string }>(
      `SELECT (SELECT count(*)::int FROM ${table}) AS n, pg_table_size('${table}') AS t, pg_indexes_size('${table}') AS i`,
    );
    return { rows: r[0].n, seconds, tableMiB: r2(Number(r[0].t) / 2 ** 20), indexesMiB: r2(Number(r[0].i) / 2 ** 20) };
  } finally {
    await client.end();
  }
}

/** `n` new records with ids from `firstId` on, as a client would POST them (timestamps as ISO strings). */
export function makeRecords(firstId: number, n: number): Record<string, unknown>[] {
  return Array.from({ length: n }, (_, k) => {
    const id = firstId + k;
    return {
      id,
      name: `Bulk ${id}`,
      email: `bulk${id}@example.com`,
      age: 18 + (id % 63),
      city: CITIES[id % CITIES.length],
      created_at: new Date(Date.UTC(2024, 0, 1) + id * 1000).toISOString(),
      score: (id % 10000) / 100,
    };
  });
}
