// The per-tenant schema mechanism: a wildcard-schema entity written through tenantEm()
// lands in that schema only.
import test from 'ava';
import { defineEntity, p } from '@mikro-orm/core';
import { MikroORM } from '@mikro-orm/postgresql';
import { createTestDatabase, type TestDatabase } from '../testing/database.ts';
import { assertSchemaName, isValidSchemaName, quotedSchema, tenantEm } from './schema.ts';

const Note = defineEntity({
  name: 'Note',
  tableName: 'note',
  schema: '*',
  properties: { id: p.integer().primary().autoincrement(), text: p.string() },
});

let db: TestDatabase;
let orm: MikroORM;
test.before(async () => {
  db = await createTestDatabase();
  orm = await MikroORM.init({ clientUrl: db.url, entities: [Note], allowGlobalContext: false });
  for (const schema of ['tenant_a', 'tenant_b']) {
    await orm.em.getConnection().execute(`CREATE SCHEMA ${quotedSchema(schema)}; CREATE TABLE ${quotedSchema(schema)}.note (id serial PRIMARY KEY, text text NOT NULL)`);
  }
});
test.after.always(async () => {
  await orm?.close(true);
  await db?.drop();
});

test('entities of one tenant are invisible from another', async (t) => {
  const a = tenantEm(orm.em, 'tenant_a');
  a.create(Note, { text: 'only in a' });
  await a.flush();
  const b = tenantEm(orm.em, 'tenant_b');
  t.is(await b.count(Note, {}), 0);
  t.deepEqual((await tenantEm(orm.em, 'tenant_a').find(Note, {})).map((n) => n.text), ['only in a']);
  const rows = await orm.em.getConnection().execute('SELECT count(*)::int AS n FROM tenant_a.note');
  t.is(rows[0].n, 1);
});

test('schema names are validated before any SQL sees them', (t) => {
  for (const good of ['tenant_a', '_x', 'a1_b2']) t.true(isValidSchemaName(good));
  for (const bad of ['public', 'pg_catalog', 'Tenant', '1abc', 'a-b', 'a"; DROP SCHEMA public; --', '', 'x'.repeat(64)]) {
    t.false(isValidSchemaName(bad), bad);
    const err = t.throws(() => assertSchemaName(bad));
    t.is((err as { code?: string }).code, 'VALIDATION_ERROR');
  }
  t.throws(() => tenantEm(orm.em, 'public'));
});
