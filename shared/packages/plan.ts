// The plan of an import, like `terraform plan` (issue 32 item 4b; docs/app-packages.md "The
// plan"): what importing a package into this site would create, update, leave unchanged or skip,
// module by module, with each changed table's migration preview (its operations and their
// safety) and the policies whose rules change. It reads only. The app as it is now is read by the
// export's own reader (export.service.ts readModules) into the package's portable form, so the
// comparison is of like with like: a package imported twice plans `0 changes`.
import type { EntityManager } from '@mikro-orm/postgresql';
import { Type, type TSchema } from '@sinclair/typebox';
import { findApp } from '../apps/lookup.ts';
import { rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { previewChanges } from '../data/migrations/migration.service.ts';
import type { Preview } from '../data/migrations/migration.schemas.ts';
import { DomainError } from '../errors.ts';
import type { SiteStore } from '../storage/objstore/types.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { bucketMetadata, readModules, type Snapshot } from './export.service.ts';
import { canonicalJson } from '../common/canonical.ts';
import { exportFlags, streamDigest, type ModuleName } from './layout.ts';
import { refused, type BucketObject, type PackageContents } from './reader.ts';

export interface ModulePlan {
  create: string[];
  update: string[];
  unchanged: string[];
  skip: string[];
  /** What the import keeps that the package lacks, what must be done after it. */
  warnings: string[];
}

export interface ImportPlan {
  app_slug: string;
  /** Whether the app exists in the site (then it is updated, else created). */
  app_exists: boolean;
  modules: Partial<Record<ModuleName, ModulePlan>>;
  /** Each changed materialized table's migration preview (the operations and their safety). */
  migrations: Record<string, Preview>;
  /** The policies whose rules change (created or updated). */
  policies_changed: string[];
  /** Items created or updated in all. */
  changes: number;
  /** `0 changes`, `1 change`, `N changes`. */
  summary: string;
  warnings: string[];
}

// ---- the module files, checked (a crafted package is refused naming the file, never a 500) ------

const Named = (key: string) => Type.Object({ [key]: Type.String({ minLength: 1 }) });
const listOf = (key: string, item: TSchema) => Type.Object({ [key]: Type.Array(item) });
const FILES: Partial<Record<ModuleName, TSchema>> = {
  app: Type.Object({ name: Type.String({ minLength: 1 }), slug: Type.String({ minLength: 1 }), description: Type.String(), settings: Type.Record(Type.String(), Type.Unknown()) }),
  app_roles: listOf('roles', Type.Composite([Named('name'), Type.Object({ parent_name: Type.Union([Type.String(), Type.Null()]) })])),
  datatables: Type.Object({ data_sources: Type.Array(Named('slug')), tables: Type.Array(Type.Composite([Named('name'), Named('data_source'), Type.Object({ json_schema: Type.Record(Type.String(), Type.Unknown()) })])) }),
  functions: listOf('functions', Named('slug')),
  events: listOf('subscriptions', Type.Composite([Named('event'), Named('function_slug')])),
  secrets: Type.Object({ secret_types: Type.Array(Named('slug')), secrets: Type.Array(Named('key')) }),
  policies: listOf('policies', Type.Composite([Named('policy_type'), Named('name')])),
  analytics: listOf('queries', Type.Record(Type.String(), Type.Unknown())),
  tags: listOf('tags', Type.Record(Type.String(), Type.Unknown())),
  storage: listOf('buckets', Named('slug')),
};

type Item = Record<string, unknown>;

function checked(contents: PackageContents): Partial<Record<ModuleName, Item>> {
  const out: Partial<Record<ModuleName, Item>> = {};
  for (const [name, value] of Object.entries(contents.modules) as [ModuleName, unknown][]) {
    const schema = FILES[name];
    if (!schema) continue;
    try {
      out[name] = validate(schema, value) as Item;
    } catch (err) {
      const detail = err instanceof DomainError ? JSON.stringify(err.errors ?? err.message) : String(err);
      throw refused(`${name}/metadata.json does not have the format's shape (${detail.slice(0, 300)}).`);
    }
  }
  return out;
}

// ---- comparing ----------------------------------------------------------------------------------

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

/** Items of the package against the app's, by `key`: created, updated, unchanged; the app's own extras kept with a warning. */
function compare(module: string, wanted: Item[], current: Item[], key: (i: Item) => string, equal: (a: Item, b: Item) => boolean = same): ModulePlan {
  const plan: ModulePlan = { create: [], update: [], unchanged: [], skip: [], warnings: [] };
  const now = new Map(current.map((i) => [key(i), i]));
  for (const item of wanted) {
    const k = key(item);
    const existing = now.get(k);
    if (!existing) plan.create.push(k);
    else if (equal(item, existing)) plan.unchanged.push(k);
    else plan.update.push(k);
    now.delete(k);
  }
  if (now.size) plan.warnings.push(`${module}: kept, not in the package: ${[...now.keys()].join(', ')}.`);
  return plan;
}

const list = (file: Item | undefined, key: string): Item[] => (file?.[key] as Item[] | undefined) ?? [];

/** A data source without its `provider_config.allow_data_loss` (the target's own safety setting). */
export const withoutDataLoss = (d: Item): Item => {
  const { allow_data_loss: _a, ...config } = (d.provider_config ?? {}) as Item;
  return { ...d, provider_config: config };
};

/** A policy's identity in a package: type, entity type, name and version. */
export const policyKey = (p: Item) => [p.policy_type, p.entity_type, p.name, p.version ?? 'default'].filter((x) => x !== undefined).join(':');

/**
 * The plan of importing `contents` into the caller's site. Needs the right to create the app when
 * it does not exist, to update it when it does (403 otherwise).
 */
export async function planImport(ctx: ServiceContext, store: SiteStore, contents: PackageContents): Promise<ImportPlan> {
  const modules = checked(contents);
  const slug = contents.manifest.package.app_slug;
  const schema = await siteSchemaFor(ctx, 'read', 'App');
  const app = await findApp(ctx.em, schema, slug, true);
  await authorizeSiteSubject(ctx, app ? 'update' : 'create', 'App', { schema, slug });
  const warnings = [...contents.warnings];
  if (app && !app.is_active) warnings.push(`The app "${slug}" is deleted (inactive): the import restores it.`);
  const snapshot: Snapshot = app
    ? await ctx.em.fork().transactional((tx) => readModules(tx as EntityManager, schema, app, exportFlags({})), { readOnly: true })
    : { modules: {}, buckets: [] };
  const cur = (name: ModuleName) => snapshot.modules[name]?.file as Item | undefined;
  const plan: ImportPlan['modules'] = {};
  const migrations: Record<string, Preview> = {};

  if (modules.app) {
    const wanted = modules.app;
    plan.app = compare('app', [wanted], app ? [cur('app')!] : [], () => slug);
  }
  if (modules.app_roles) plan.app_roles = compare('app_roles', list(modules.app_roles, 'roles'), list(cur('app_roles'), 'roles'), (r) => String(r.name));
  if (modules.datatables) {
    // The site's own allow_data_loss decides whether its tables may lose data: never compared, never imported over (import.service.ts).
    const sources = compare('data sources', list(modules.datatables, 'data_sources').map(withoutDataLoss), list(cur('datatables'), 'data_sources').map(withoutDataLoss), (d) => `data_source:${d.slug}`);
    const tables = compare('data tables', list(modules.datatables, 'tables'), list(cur('datatables'), 'tables'), (t) => String(t.name), (a, b) => same({ ...a, schema_hash: undefined }, { ...b, schema_hash: undefined }));
    const nowTables = new Map(list(cur('datatables'), 'tables').map((t) => [String(t.name), t]));
    for (const name of tables.update) {
      const wanted = list(modules.datatables, 'tables').find((t) => t.name === name)!;
      const existing = nowTables.get(name)!;
      if (existing.is_materialized && !same(wanted.json_schema, existing.json_schema)) {
        migrations[name] = await previewChanges(ctx, { app_slug: slug }, name, { new_schema: wanted.json_schema });
        if (!migrations[name].is_safe) tables.warnings.push(`${name}: the migration is unsafe: ${migrations[name].warnings.filter((w) => w.startsWith('Unsafe')).join(' ')}`);
      }
      if (existing.is_materialized && wanted.is_materialized === false) tables.warnings.push(`${name}: materialized here; an import never drops a table's storage.`);
    }
    const skipped = (modules.datatables.skipped_reference_tables as string[] | undefined) ?? [];
    plan.datatables = {
      create: [...sources.create, ...tables.create],
      update: [...sources.update, ...tables.update],
      unchanged: [...sources.unchanged, ...tables.unchanged],
      skip: skipped.map((t) => `reference table ${t}`),
      warnings: [...sources.warnings, ...tables.warnings],
    };
  }
  if (modules.functions) plan.functions = compare('functions', list(modules.functions, 'functions'), list(cur('functions'), 'functions'), (f) => String(f.slug));
  if (modules.events) plan.events = compare('events', list(modules.events, 'subscriptions'), list(cur('events'), 'subscriptions'), (e) => `${e.event}:${e.function_slug}`);
  if (modules.secrets) {
    // A value is never compared nor overwritten: an existing secret keeps its value; a new one gets the placeholder.
    const strip = (s: Item) => ({ key: s.key, description: s.description, secret_type: s.secret_type });
    const secrets = compare('secrets', list(modules.secrets, 'secrets').map(strip), list(cur('secrets'), 'secrets').map(strip), (s) => String(s.key));
    // Secret types are the site's: a missing one is created, an existing one kept as it is.
    const types = list(modules.secrets, 'secret_types');
    const known = types.length ? await rows<Item>(ctx.em, `SELECT slug, name, description, json_schema FROM ${quotedSchema(schema)}.secret_types WHERE slug IN (?)`, [types.map((t) => t.slug)]) : [];
    for (const type of types) {
      const existing = known.find((k) => k.slug === type.slug);
      if (!existing) secrets.create.unshift(`secret_type:${type.slug}`);
      else if (!same(type, existing)) secrets.warnings.push(`secret type ${type.slug}: the site's own is kept (it differs from the package's).`);
    }
    const placeholders = secrets.create.filter((k) => !k.startsWith('secret_type:'));
    if (placeholders.length) secrets.warnings.push(`Set the values of ${placeholders.join(', ')} after the import (they hold the placeholder).`);
    plan.secrets = secrets;
  }
  if (modules.policies) plan.policies = compare('policies', list(modules.policies, 'policies'), list(cur('policies'), 'policies'), policyKey);
  if (modules.storage) {
    const buckets = compare(
      'buckets',
      list(modules.storage, 'buckets').map(({ file_count: _f, total_size_bytes: _t, archive: _a, ...b }) => b),
      snapshot.buckets.map(({ bucket }) => bucketMetadata(bucket)),
      (b) => `bucket:${b.slug}`,
    );
    const files: ModulePlan = { create: [], update: [], unchanged: [], skip: [], warnings: [] };
    for (const [bucketSlug, archive] of contents.buckets) {
      const existing = new Map((snapshot.buckets.find((b) => b.bucket.slug === bucketSlug)?.objects ?? []).map((o) => [o.path, o]));
      for (const o of archive.metadata.objects as BucketObject[]) {
        const k = `${bucketSlug}/${o.path}`;
        const now = existing.get(o.path);
        if (!now) files.create.push(k);
        else if (Number(now.size) !== o.size || now.mimetype !== o.mimetype || !same(now.metadata, o.metadata) || now.visibility !== o.visibility || (await streamDigest(await store.get(now.blob_key))) !== o.sha256) files.update.push(k);
        else files.unchanged.push(k);
        existing.delete(o.path);
      }
      if (existing.size) files.warnings.push(`bucket ${bucketSlug}: ${existing.size} file(s) not in the package are kept.`);
    }
    plan.storage = { create: [...buckets.create, ...files.create], update: [...buckets.update, ...files.update], unchanged: [...buckets.unchanged, ...files.unchanged], skip: [], warnings: [...buckets.warnings, ...files.warnings] };
  }
  for (const name of ['analytics', 'tags'] as const) if (modules[name]) plan[name] = { create: [], update: [], unchanged: [], skip: [], warnings: [] };

  const changes = Object.values(plan).reduce((n, m) => n + m!.create.length + m!.update.length, 0);
  const policiesChanged = plan.policies ? [...plan.policies.create, ...plan.policies.update] : [];
  return {
    app_slug: slug,
    app_exists: Boolean(app),
    modules: plan,
    migrations,
    policies_changed: policiesChanged,
    changes,
    summary: `${changes} change${changes === 1 ? '' : 's'}`,
    warnings: [...warnings, ...Object.values(plan).flatMap((m) => m!.warnings)],
  };
}
