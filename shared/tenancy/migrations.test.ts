// Tenant migrations: idempotent, resumable after a failure, reported per schema.
import test from 'ava';
import { platformDatabase } from '../testing/platform-db.ts';
import { createTestSite } from '../testing/sites.ts';
import { CURRENT_TENANT_VERSION, migrateAllTenants, migrateTenantSchema, tenantStatus } from './migrations.ts';

const orm = platformDatabase(test);

/** Puts a schema back to version 1: drops what later migrations created. */
async function rewindToVersion1(schema: string): Promise<void> {
  const em = orm().em.fork();
  const later = ['record_changes_tables', 'record_changes', 'app_import_jobs', 'app_export_jobs', 'frontend_worker_blobs', 'frontend_worker_builds', 'frontend_workers', 'event_subscriptions', 'function_invocations', 'functions', 'social_login_states', 'social_accounts', 'social_apps', 'storage_blob_journal', 'storage_objects', 'storage_buckets', 'schema_operations', 'policies', 'app_role_assignments', 'app_roles', 'data_tables', 'data_sources', 'app_settings', 'apps', 'secret_history', 'secrets', 'secret_types'];
  await em.execute(`DROP TABLE IF EXISTS ${later.map((t) => `${schema}.${t}`).join(', ')}`);
  await em.execute(`DROP TRIGGER IF EXISTS users_changed ON ${schema}.users`); // migration 5's, on a table of version 1
  await em.execute(`DROP FUNCTION IF EXISTS ${schema}.datatable_policies_follow(), ${schema}.datatable_system_policies(text, integer, text, text)`); // migration 6's
  await em.execute(`DROP FUNCTION IF EXISTS ${schema}.storage_policies_follow(), ${schema}.system_policies_follow()`); // migrations 8's and 11's
  await em.execute(`DROP FUNCTION IF EXISTS ${schema}.record_changes_attach(text, text, text[]), ${schema}.record_changes_detach(text, text), ${schema}.record_changes_reattach(text), ${schema}.storage_objects_log_changes() CASCADE`); // migration 16's
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

test.serial('migration 12 gives stored policy ids the spec\'s form; an id taken, or a role policy of another version, keeps its own', async (t) => {
  const em = orm().em.fork();
  const site = await createTestSite(em);
  const q = `"${site.schema}"`;
  // The schema as migration 11 left it, holding policies under Cerbos' ids.
  await em.execute(`ALTER TABLE ${q}.schema_operations DROP COLUMN execution_time_ms`);
  await em.execute(`DROP TRIGGER functions_changed ON ${q}.functions`); // migration 15's
  await em.execute(`DROP TABLE ${q}.app_import_jobs, ${q}.app_export_jobs`); // migration 14's
  await em.execute(`DROP TABLE ${q}.frontend_worker_blobs, ${q}.frontend_worker_builds, ${q}.frontend_workers CASCADE`); // migration 13's
  const old = {
    'resource.doc_report.vdefault/s_crm': ['resource', 'doc:report', 'default'],
    'resource.doc_report.vdefault': ['resource', 'doc:report', 'default'],
    'resource.doc_y.v2/s_crm': ['resource', 'doc:y', '2'],
    'resource.doc_y.vv2/s_crm': ['resource', 'doc:y', 'v2'],
    'role.editor.vdefault/s_crm': ['role', 'editor', 'default'],
    'role.editor.vv2/s_crm': ['role', 'editor', 'v2'],
    'principal.u9.vdefault/s_crm': ['principal', 'u9', 'default'],
    'derived_roles.s_crm_owners': ['derived_role', 's_crm_owners', 'default'],
    'resource.kept.default/s_crm': ['resource', 'kept', 'default'],
    'resource.kept.vdefault/s_crm': ['resource', 'kept', 'default'],
  };
  for (const [id, [kind, name, v]] of Object.entries(old)) {
    await em.execute(`INSERT INTO ${q}.policies (id, kind, name, version, document) VALUES (?, ?, ?, ?, '{}')`, [id, kind, name, v]);
  }
  await em.execute('UPDATE public.tenant_schemas SET version = 11 WHERE schema_name = ?', [site.schema]);
  const result = await migrateTenantSchema(orm().em.fork(), site.schema);
  t.deepEqual(result.applied, ['0012_spec_forms', '0013_frontend_workers', '0014_app_packages', '0015_function_changes', '0016_record_changes', '0017_record_changes_entries']);
  const ids = (await em.execute(`SELECT id, name, version FROM ${q}.policies ORDER BY id`)).map((r) => `${r.id} ${r.name} ${r.version}`);
  t.deepEqual(ids, [
    'derived_roles.s_crm_owners s_crm_owners default',
    'principal.u9.default/s_crm u9 default',
    'resource.doc_report.default doc:report default',
    'resource.doc_report.default/s_crm doc:report default',
    'resource.doc_y.2/s_crm doc:y 2',
    'resource.doc_y.v2/s_crm doc:y v2',
    'resource.kept.default/s_crm kept default',
    'resource.kept.vdefault/s_crm kept default', // its new id is taken: it keeps the old one
    'role.editor.vv2/s_crm editor v2', // role ids carry no version: only "default" is renamed
    'role.editor/s_crm editor default',
  ]);
  t.deepEqual(await em.execute(`SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = 'schema_operations' AND column_name = 'execution_time_ms'`, [site.schema]), [{ column_name: 'execution_time_ms' }]);
});
