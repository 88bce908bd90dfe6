// Malformed table schemas never reach a 500 (issue 30 #9): generated from a valid schema by a
// seeded PRNG (wrong types at every level, nulls, huge and deep values, unknown types, bad
// constraints, primaryKey and foreignKeys naming nothing, non-object bodies), sent to table
// create, PUT and PATCH (a table not materialized and a materialized one), preview-changes,
// validate-schema and validate_data. Every answer is below 500; a 400 is the standard envelope
// whose field-keyed errors name json_schema, or the exact body field at fault. A failure prints
// the seed and the case: `FUZZ_SEED=<seed> npm test -- server/test/schema-fuzz.test.ts` replays it.
import test from 'ava';
import { ENVELOPE_MEMBERS } from '../../shared/errors.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 309);
const CASES = Number(process.env.FUZZ_CASES ?? 400);

let s: TestServer;
let a: TestSite;
const tok: Record<string, string> = {};
const onA = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminA, body });
const rawOnA = (method: string, path: string, raw: string) => s.api(method, path, { host: a.domain, token: tok.adminA, raw, headers: { 'Content-Type': 'application/json' } });

/** mulberry32: small, seeded, the same sequence on every machine. */
function prng(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (x + 0x6d2b79f5) >>> 0;
    let t = x;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const BASE: Json = {
  primaryKey: ['id'],
  missingValues: ['', 'NA'],
  fields: [
    { name: 'id', type: 'integer', constraints: { required: true } },
    { name: 'name', type: 'string', format: 'default', constraints: { maxLength: 50, pattern: '[a-z]+', enum: ['ab', 'cd'] } },
    { name: 'amount', type: 'number', groupChar: ',', decimalChar: '.', bareNumber: false, constraints: { minimum: 0, maximum: 10 } },
    { name: 'active', type: 'boolean', trueValues: ['yes'], falseValues: ['no'] },
    { name: 'at', type: 'geopoint', format: 'array' },
    { name: 'target_id', type: 'integer' },
  ],
  foreignKeys: [{ fields: ['target_id'], reference: { resource: 'fz_target', fields: ['id'] }, 'x-actions': { onDelete: 'SET NULL' } }],
  indexes: [{ name: 'by_name', fields: ['name'], method: 'btree', unique: false }],
  title: 'Fuzz',
};

function deep(depth: number, leaf: Json = 1): Json {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { x: v };
  return v;
}

/** Values of every JSON type, and the nasty ones. */
function junk(r: () => number): Json {
  const pick = Math.floor(r() * 22);
  switch (pick) {
    case 0: return null;
    case 1: return r() < 0.5;
    case 2: return 0;
    case 3: return -1;
    case 4: return 1.5;
    case 5: return 1e308;
    case 6: return '';
    case 7: return 'x';
    case 8: return 'x'.repeat(20_000 + Math.floor(r() * 40_000));
    case 9: return [];
    case 10: return [null];
    case 11: return {};
    case 12: return JSON.parse('{"__proto__": 1, "constructor": "x", "toString": []}') as Json;
    case 13: return deep(20 + Math.floor(r() * 200));
    case 14: return Array.from({ length: 500 + Math.floor(r() * 2000) }, (_, i) => ({ name: `f${i}`, type: 'string' }));
    case 15: return '\u0000';
    case 16: return ['strnig', 'number', 'uuid', 'any', 'object'][Math.floor(r() * 5)]!;
    case 17: return ['(', '(?=a)', 'a{99999}', '[z-a]', '\\'][Math.floor(r() * 5)]!;
    case 18: return ['id', 'nope', 'fz_target', 'fz_live', '__proto__', 'constructor'][Math.floor(r() * 6)]!;
    case 19: return { resource: 'ghost', fields: ['id'] };
    case 20: return [{ name: 1 }, { type: 'string' }];
    default: return -0.000001;
  }
}

/** Every path to a value of a document ([] is the document itself). */
function paths(v: Json, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out));
  else if (v && typeof v === 'object') for (const k of Object.keys(v)) paths(v[k]!, [...at, k], out);
  return out;
}

/** A copy of the valid schema with one to three mutations at random places. */
function mutant(r: () => number): Json {
  let doc = structuredClone(BASE) as Json;
  const n = 1 + Math.floor(r() * 3);
  for (let m = 0; m < n; m++) {
    const all = paths(doc);
    const path = all[Math.floor(r() * all.length)]!;
    const kind = Math.floor(r() * 4);
    if (!path.length) {
      doc = kind === 0 ? junk(r) : doc;
      if (kind !== 0 && doc && typeof doc === 'object' && !Array.isArray(doc)) doc[`unknown_${m}`] = junk(r);
      continue;
    }
    const parent = path.slice(0, -1).reduce<Json>((x, k) => (x as Record<string | number, Json>)[k]!, doc) as Record<string | number, Json> | Json[];
    const key = path[path.length - 1]!;
    if (kind === 0 || kind === 1) (parent as Record<string | number, Json>)[key] = junk(r);
    else if (kind === 2) {
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete (parent as Record<string, Json>)[key];
    } else if (Array.isArray(parent)) parent.push(junk(r));
    else (parent as Record<string, Json>)[`x_${m}`] = junk(r);
  }
  return doc;
}

interface Route {
  label: string;
  method: string;
  path: string;
  /** The body around a schema (or the body itself, when not an object). */
  wrap: (schema: Json, i: number) => Json;
  /** The body member holding the schema: a problem deep inside it is named by it (the body's depth limit). */
  member: string;
}

const T = (name: string) => `/api/apps/crm/datatables/${name}/`;
const ROUTES: Route[] = [
  { label: 'create', method: 'POST', path: '/api/apps/crm/datasources/main/datatables/', wrap: (json_schema, i) => ({ name: `fz_new_${i}`, json_schema }), member: 'json_schema' },
  { label: 'PATCH (not materialized)', method: 'PATCH', path: T('fz_plain'), wrap: (json_schema) => ({ json_schema }), member: 'json_schema' },
  { label: 'PUT (not materialized)', method: 'PUT', path: T('fz_plain'), wrap: (json_schema) => ({ json_schema }), member: 'json_schema' },
  { label: 'PATCH (materialized)', method: 'PATCH', path: T('fz_live'), wrap: (json_schema) => ({ json_schema }), member: 'json_schema' },
  { label: 'preview-changes', method: 'POST', path: `${T('fz_live')}preview-changes/`, wrap: (new_schema) => ({ new_schema }), member: 'new_schema' },
  { label: 'preview-changes (not materialized)', method: 'POST', path: `${T('fz_plain')}preview-changes/`, wrap: (new_schema) => ({ new_schema }), member: 'new_schema' },
  { label: 'validate-schema', method: 'POST', path: `${T('fz_live')}validate-schema/`, wrap: (schema) => ({ schema }), member: 'schema' },
  { label: 'validate_data', method: 'POST', path: `${T('fz_live')}validate_data/`, wrap: (data) => ({ data: [data] }), member: 'data' },
];

test.before(async () => {
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a]);
  await s.handle.db.orm.em.fork().getConnection().execute(`UPDATE "${a.schema}".app_settings SET max_datatables = 100000`);
  const target = { primaryKey: 'id', fields: [{ name: 'id', type: 'integer' }] };
  await createTables(onA, [['main', 'fz_target', target as never], ['main', 'fz_live', BASE as never]]);
  const plain = await onA('POST', '/api/apps/crm/datasources/main/datatables/', { name: 'fz_plain', json_schema: BASE });
  if (plain.status !== 201) throw new Error(plain.text);
  // Records, so that migrations have data to convert.
  const rows = await onA('POST', `${T('fz_live')}data/`, [{ id: 1, name: 'ab', amount: '1.5', active: 'yes', at: [1, 2] }, { id: 2, name: 'cd', amount: 0 }]);
  if (rows.status !== 201) throw new Error(rows.text);
});
test.after.always(async () => {
  await s?.close();
});

/**
 * What is wrong with an answer, or undefined. `whole`: the body itself is the junk (else a schema
 * inside a well-formed body is).
 */
function problem(route: Route, sent: unknown, text: string, whole: boolean, res: { status: number; body: any }): string | undefined {
  if (res.status >= 500) return `${res.status}`;
  if (route.label === 'validate-schema' && res.status === 200) {
    const b = res.body;
    if (typeof b?.valid !== 'boolean' || !Array.isArray(b.errors) || (!b.valid && !b.errors.length)) return 'validate-schema: not {valid, errors}';
    return undefined;
  }
  if (res.status !== 400) return undefined;
  const { status, code, errors } = res.body ?? {};
  if (status !== 'error') return '400 not in the standard envelope';
  const isObject = typeof sent === 'object' && sent !== null && !Array.isArray(sent);
  // A JSON body that is no object or array, or holds a `__proto__` member, does not parse (koa-body's
  // strict and prototype-safe JSON): malformed, no fields to name.
  if (code === 'BAD_REQUEST' && ((whole && (sent === null || typeof sent !== 'object')) || text.includes('"__proto__"'))) return undefined;
  // A valid schema whose migration the table's rows refuse (an enum narrowed below the values
  // stored): the failed operation is recorded (its revision_id) and nothing changed (docs/migrations.md).
  if (code === 'BAD_REQUEST' && route.label === 'PATCH (materialized)' && typeof res.body.revision_id === 'string') return undefined;
  if (code !== 'VALIDATION_ERROR') return `400 ${code}, not VALIDATION_ERROR`;
  if (!errors || typeof errors !== 'object' || !Object.keys(errors).length) return '400 without field errors';
  for (const [field, list] of Object.entries(errors)) {
    if (!Array.isArray(list) || !list.length || !list.every((m) => typeof m === 'string' && m.length)) return `errors.${field} is not an array of messages`;
    // The spec's field form: the same lists at the top level (docs/api-conventions.md "Field errors").
    if (!ENVELOPE_MEMBERS.has(field) && JSON.stringify(res.body[field]) !== JSON.stringify(list)) return `${field} is not beside errors`;
  }
  const named = Object.keys(errors);
  if (!isObject) return named.includes('non_field_errors') || (Array.isArray(sent) && named.every((f) => /^\d+$/.test(f))) ? undefined : `400 names ${named.join(', ')}, not non_field_errors`;
  // A junk object body: its own members are named (unknown, missing or wrong).
  if (whole) return undefined;
  if (route.label === 'validate_data') return named.every((f) => f === 'data' || /^data\./.test(f)) ? undefined : `400 names ${named.join(', ')}, not data`;
  return named.includes('json_schema') || named.includes(route.member) ? undefined : `400 names ${named.join(', ')}, not json_schema`;
}

test.serial(`malformed schemas (seed ${SEED}, ${CASES} cases): never a 5xx; 400s name json_schema or the body field at fault`, async (t) => {
  const r = prng(SEED);
  const failures: string[] = [];
  const started = Date.now();
  const check = async (i: number, route: Route, body: unknown, whole: boolean, raw?: string) => {
    const text = raw ?? JSON.stringify(body);
    const res = await rawOnA(route.method, route.path, text);
    const wrong = problem(route, body, text, whole, res);
    if (wrong) failures.push(`case ${i} ${route.label}: ${wrong}; sent ${text.slice(0, 300)}; got ${res.text.slice(0, 300)}`);
  };
  for (let i = 0; i < CASES; i++) {
    const route = ROUTES[Math.floor(r() * ROUTES.length)]!;
    const roll = r();
    // Mostly a schema a few mutations away from a valid one; some bodies of another type, some wholly random schemas.
    if (roll < 0.08) await check(i, route, junk(r), true);
    else if (roll < 0.18) await check(i, route, route.wrap(junk(r), i), false);
    else await check(i, route, route.wrap(mutant(r), i), false);
  }
  // Far deeper than anything walks recursively (a few hundred thousand levels fit in the body limit).
  const tower = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
  for (const route of ROUTES) {
    const body = JSON.stringify(route.wrap({ fields: [{ name: 'a', type: 'any', default: 'TOWER' }] }, CASES + 1)).replace('"TOWER"', tower);
    await check(CASES + 1, route, JSON.parse(body), false, body);
  }
  t.true(Date.now() - started < 20_000, `took ${Date.now() - started} ms`);
  t.deepEqual(failures, [], `seed ${SEED}`);
  // The tables are still usable: nothing half-applied.
  for (const name of ['fz_plain', 'fz_live']) t.is((await onA('GET', T(name))).status, 200);
});

test.serial('issue 30 #9: PATCH with fields not an array is a 400 on json_schema, and nothing changes', async (t) => {
  for (const name of ['fz_plain', 'fz_live']) {
    const before = (await onA('GET', T(name))).body.data;
    for (const json_schema of [{ fields: 'x' }, { fields: [null] }, { fields: [1, 'a'] }, null, 'schema', [BASE]]) {
      const res = await onA('PATCH', T(name), { json_schema });
      t.is(res.status, 400, `${name} ${JSON.stringify(json_schema)}: ${res.text}`);
      t.is(res.body.code, 'VALIDATION_ERROR');
      t.true(Array.isArray(res.body.errors.json_schema) && res.body.errors.json_schema.length > 0, res.text);
    }
    t.deepEqual((await onA('GET', T(name))).body.data, before);
  }
});
