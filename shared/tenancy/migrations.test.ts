// Tenant migrations: idempotent, resumable after a failure, reported per schema.
import test from 'ava';
import { platformDatabase } from '../testing/platform-db.ts';
import { createTestSite } from '../testing/sites.ts';
import { CURRENT_TENANT_VERSION, migrateAllTenants, migrateTenantSchema, tenantStatus } from './migrations.ts';

const orm = platformDatabase(test);

/** Puts a schema back to version 1: drops what later migrations created. */
async function rewindToVersion1(schema: string): Promise<void> {
  const em = orm().em.fork();
  const later = ['event_subscriptions', 'function_invocations', 'functions', 'social_login_states', 'social_accounts', 'social_apps', 'storage_blob_journal', 'storage_objects', 'storage_buckets', 'schema_operations', 'policies', 'app_role_assignments', 'app_roles', 'data_tables', 'data_sources', 'app_settings', 'apps', 'secret_history', 'secrets', 'secret_types'];
  await em.execute(`DROP TABLE IF EXISTS ${later.map((t) => `${schema}.${t}`).join(', ')}`);
  await em.execute(`DROP TRIGGER IF EXISTS users_changed ON ${schema}.users`); // migration 5's, on a table of version 1
  await em.execute(`DROP FUNCTION IF EXISTS ${schema}.datatable_policies_follow(), ${schema}.datatable_system_policies(text, integer, text, text)`); // migration 6's
  await em.execute(`DROP FUNCTION IF EXISTS ${schema}.storage_policies_follow(), ${schema}.system_policies_follow()`); // migrations 8's and 11's
  await em.execute(`ALTER TABLE ${schema}.users DROP COLUMN IF EXISTS attributes, DROP COLUMN IF EXISTS email_verified`);
  await em.execute('UPDATE public.tenant_schemas SET version = 1 WHERE schema_name = ?', [schema]);
}

const version = async (schema: string) =>
  Number((await orm().em.fork().execute('SELECT version FROM public.tenant_schemas WHERE schema_name = ?', [schema]))[0].version);

test.serial('a new site schema is at the current version; migrating again changes nothing', async (t) => {
  const site = await createTestSite(orm().em.fork());
  t.is(await version(site.schema), CURRENT_TENANT_VERSION);
  const again = await migrateTenantSchema(orm().em.fork(), site.schema);
  t.deepEqual(again.applied, []);
  t.is(again.to, CURRENT_TENANT_VERSION);
});

test.serial('a failing migration stops that schema at its last good version; the next run resumes', async (t) => {
  const em = orm().em.fork();
  const site = await createTestSite(em);
  // Put the schema back to version 1 with an obstacle that makes migration 2 fail.
  await rewindToVersion1(site.schema);
  await em.execute(`CREATE TABLE ${site.schema}.secrets (x int)`);
  const healthy = await createTestSite(em);
  await rewindToVersion1(healthy.schema);

  const first = await migrateAllTenants(orm().em.fork());
  t.deepEqual(first.failed.map((f) => f.schema), [site.schema]);
  t.true(first.migrated.some((m) => m.schema === healthy.schema), 'the other schemas still run');
  t.is(await version(site.schema), 1);
  t.is(await version(healthy.schema), CURRENT_TENANT_VERSION);
  const status = (await tenantStatus(orm().em.fork())).find((s) => s.schema === site.schema)!;
  t.like(status, { version: 1, pending: CURRENT_TENANT_VERSION - 1 });
  t.regex(status.last_error ?? '', /already exists/);
  // Nothing half-made: the failed migration's other tables were rolled back with it.
  const tables = await em.execute(`SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_name IN ('secret_types', 'secret_history')`, [site.schema]);
  t.deepEqual(tables, []);

  await em.execute(`DROP TABLE ${site.schema}.secrets`);
  const second = await migrateAllTenants(orm().em.fork());
  t.deepEqual(second.failed, []);
  t.deepEqual(second.migrated.map((m) => [m.schema, m.from, m.to]), [[site.schema, 1, CURRENT_TENANT_VERSION]]);
  t.is((await tenantStatus(orm().em.fork())).find((s) => s.schema === site.schema)!.last_error, null);
});

test.serial('concurrent runs on one schema serialise: each migration is applied once', async (t) => {
  const em = orm().em.fork();
  const site = await createTestSite(em);
  await rewindToVersion1(site.schema);
  const results = await Promise.all([1, 2, 3].map(() => migrateTenantSchema(orm().em.fork(), site.schema)));
  t.is(results.flatMap((r) => r.applied).length, CURRENT_TENANT_VERSION - 1);
  t.is(await version(site.schema), CURRENT_TENANT_VERSION);
});
