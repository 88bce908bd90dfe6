// `platform site restore` (docs/backup.md). Pass one reads the whole archive and checks every
// entry against the manifest, and the manifest against this platform: nothing is written before
// it passes. Pass two reads it again (checking again: the file may have changed meanwhile),
// writes the blobs into the new site's store and keeps the dump in a temporary file. Then ONE
// transaction on a connection of its own restores the schema (pg_restore turns the dump into
// SQL, run here, the rows through COPY), renames it when restored under another name, rewrites
// what carries the schema's name (policy scopes; secrets sealed with it as associated data),
// and writes the platform rows. It commits whole, or rolls back and the blobs written are
// deleted: no half-made site. A schema behind the current version is migrated afterwards, as
// `platform migrate` would (resumable the same way).
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createInterface } from 'node:readline';
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import { from as copyFrom, type CopyStreamQuery } from 'pg-copy-streams';
import type { Environment } from '../config.ts';
import { nextSlug, slugify } from '../common/slug.ts';
import { CHANGES_CHANNEL } from '../db/changes.ts';
import { DomainError } from '../errors.ts';
import type { PolicyDocument } from '../policies/model.ts';
import { columnsOf } from '../policies/store.ts';
import { secretAad, SecretKeyring } from '../secrets/crypto.ts';
import { newVerificationToken, underBaseDomain } from '../sites/domain-verification.ts';
import { domainSlug } from '../sites/site.naming.ts';
import { socialSecretAad } from '../social/social-app.service.ts';
import type { ObjectStore } from '../storage/objstore/types.ts';
import { CURRENT_TENANT_VERSION, migrateTenantSchema, TENANT_EXTENSIONS } from '../tenancy/migrations.ts';
import { assertSchemaName, quotedSchema } from '../tenancy/schema.ts';
import { placeSite, PRIMARY_CLUSTER, siteEmOf } from '../db/clusters.ts';
import { workerHost } from '../workers/hostnames.ts';
import { badArchive, checkEntry, DUMP_ENTRY, hashed, MANIFEST, PLATFORM_ENTRY, readArchive, verifyArchive, type Manifest } from './archive.ts';
import type { PlatformRows } from './backup.ts';
import { connectionArgs, pgTools, runTool, queryRows as all } from './pg-tools.ts';

export interface RestoreProgress {
  phase: 'verify' | 'blobs' | 'schema' | 'done';
  bytes: number;
  total: number;
}

export interface RestoreOptions {
  databaseUrl: string;
  pgBinDir?: string;
  store: ObjectStore;
  /** This platform's keyring: restored secret values are sealed with it. */
  keyring: SecretKeyring;
  /** The source platform's PLATFORM_SECRET_KEY when it differs from this one's (values are opened with it). */
  sourceSecretKey?: string;
  /** For the migration of an older schema, after the commit. */
  em: EntityManager;
  settings: { environment: Environment; baseDomain: string; platformHosts: readonly string[] };
  /** A new schema name (and slug and name) for the restored site. */
  as?: string;
  /** The organization to restore into (slug or UUID) when the archive's is not on this platform. */
  org?: string;
  /** The cluster to restore onto (db/clusters.ts); else placed as a new site is. */
  cluster?: string;
  onProgress?: (p: RestoreProgress) => void;
}

export interface RestoreResult {
  site: { uuid: string; name: string; slug: string; schema_name: string };
  organization: string;
  schema_version: { archive: number; now: number };
  blobs: number;
  primary_domain: string;
  domains: { domain: string; restored: boolean; note: string }[];
  grants: { attached: number; missing: string[] };
  linked_users: { relinked: number; unmatched: string[] };
  workers: { slug: string; host: string | null; note: string }[];
  duration_ms: number;
}

const conflict = (message: string) => new DomainError('CONFLICT', `${message} Nothing was changed.`);

/** Restores the site in the archive `file`; see the file comment. */
export async function restoreSite(file: string, options: RestoreOptions): Promise<RestoreResult> {
  const started = Date.now();
  const progress = options.onProgress ?? (() => undefined);
  const client = new pg.Client({ connectionString: options.databaseUrl });
  await client.connect();
  let site = client; // where the schema goes: the primary, or the chosen cluster's database
  const temp = await mkdtemp(path.join(os.tmpdir(), 'platform-restore-'));
  let written: string[] = []; // blob keys put into the new site's store: deleted if the restore fails
  let schema = '';
  try {
    // Pass one: nothing is written before the whole archive checks out.
    let verified = 0;
    const manifest = await verifyArchive(file, (n) => progress({ phase: 'verify', bytes: (verified += n), total: 0 }));
    const total = manifest.entries.reduce((s, e) => s + e.size, 0);
    const source = assertArchived(manifest);
    schema = options.as !== undefined ? assertSchemaName(options.as) : source;
    const slug = options.as !== undefined ? slugify(options.as.replace(/_/g, '-')) || 'site' : manifest.site.slug;
    const cluster = await placeSite(options.em.fork(), options.cluster);
    if (cluster !== PRIMARY_CLUSTER) {
      const [{ url }] = await all<{ url: string }>(client, 'SELECT coalesce(direct_url, url) AS url FROM public.clusters WHERE name = $1', [cluster]);
      site = new pg.Client({ connectionString: url });
      await site.connect();
    }
    const [{ server_version_num }] = await all<{ server_version_num: string }>(site, 'SHOW server_version_num');
    const tools = pgTools(Number(server_version_num), options.pgBinDir);
    if (manifest.postgres_major > tools.major) throw badArchive(`its dump was made by PostgreSQL ${manifest.postgres_major}, newer than this server (${tools.major}).`);
    const applied = await all<{ name: string }>(client, 'SELECT name FROM public.platform_migrations WHERE name = $1', [manifest.platform_schema_version]);
    if (!applied.length) throw badArchive(`it was made by a platform whose schema (${manifest.platform_schema_version}) is newer than this one's: upgrade this platform first.`);
    await assertFree(client, site, schema, slug);

    // Pass two: the dump to a file, the platform rows to memory, the blobs into the new site's store.
    const expected = new Map(manifest.entries.map((e) => [e.name, e]));
    const dumpFile = path.join(temp, 'schema.dump');
    let rowsJson: Buffer | undefined;
    const siteStore = options.store.site(schema);
    let bytes = 0;
    const count = (n: number) => progress({ phase: 'blobs', bytes: (bytes += n), total });
    await readArchive(file, async (name, size, body) => {
      if (name === MANIFEST) return void body.resume();
      const entry = expected.get(name);
      const hash = createHash('sha256');
      const counted = { bytes: 0 };
      const through = Readable.from(hashed(body, hash, counted, count));
      if (name === DUMP_ENTRY) await pipeline(through, createWriteStream(dumpFile));
      else if (name === PLATFORM_ENTRY) rowsJson = Buffer.concat(await through.toArray());
      else if (entry?.key !== undefined) {
        written.push(entry.key);
        await siteStore.put(entry.key, through, { contentType: entry.content_type ?? 'application/octet-stream', size });
      } else throw badArchive(`its entry ${JSON.stringify(name)} is not in the manifest.`);
      checkEntry(entry, name, counted.bytes, hash.digest('hex'));
    });
    const rows = parseRows(rowsJson!);

    progress({ phase: 'schema', bytes, total });
    const result = await restoreInTransaction(client, site, { manifest, rows, source, schema, slug, dumpFile, tools, options, cluster });
    progress({ phase: 'done', bytes, total });
    written = []; // the site holds them now
    let now = manifest.schema_version;
    if (now < CURRENT_TENANT_VERSION) {
      now = await migrateTenantSchema(await siteEmOf(options.em.fork(), schema), schema).then(
        (r) => r.to,
        (err: unknown) => {
          throw new Error(`The site was restored at schema version ${manifest.schema_version}, but its migration failed (${err instanceof Error ? err.message : String(err)}): run \`platform migrate\` to resume.`);
        },
      );
    }
    return { ...result, blobs: manifest.entries.filter((e) => e.key !== undefined).length, schema_version: { archive: manifest.schema_version, now }, duration_ms: Date.now() - started };
  } catch (err) {
    // The failure is what the operator needs to read; a store that cannot delete now leaves unreferenced blobs (docs/backup.md).
    if (written.length) await options.store.site(schema).delete(written).catch(() => undefined);
    throw err;
  } finally {
    await rm(temp, { recursive: true, force: true });
    await client.end().catch(() => undefined);
    if (site !== client) await site.end().catch(() => undefined);
  }
}

/** The archive's source schema name, once its versions are ones this platform restores. */
function assertArchived(m: Manifest): string {
  if (m.schema_version > CURRENT_TENANT_VERSION) throw badArchive(`its site schema is at version ${m.schema_version}, newer than this platform's ${CURRENT_TENANT_VERSION}: upgrade this platform first.`);
  if (m.schema_version < 1) throw badArchive('its site schema has no version.');
  try {
    return assertSchemaName(m.site.schema_name);
  } catch {
    throw badArchive('its site schema name is not a valid one.');
  }
}

function parseRows(json: Buffer): PlatformRows {
  try {
    const rows = JSON.parse(json.toString('utf8')) as PlatformRows;
    if (rows.site && rows.organization && Array.isArray(rows.domains) && Array.isArray(rows.grants) && Array.isArray(rows.linked_users)) return rows;
  } catch {
    // refused below
  }
  throw badArchive('its platform rows are malformed.');
}

/** Refuses a schema name or slug in use (by a site, or a schema of the target cluster's database). */
async function assertFree(client: pg.Client, site: pg.Client, schema: string, slug: string): Promise<void> {
  const [taken] = await all<{ schema_site: boolean; slug_site: boolean }>(
    client,
    'SELECT EXISTS (SELECT 1 FROM public.sites WHERE schema_name = $1) AS schema_site, EXISTS (SELECT 1 FROM public.sites WHERE slug = $2) AS slug_site',
    [schema, slug],
  );
  const [{ namespace }] = await all<{ namespace: boolean }>(site, 'SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS namespace', [schema]);
  if (taken!.schema_site) throw conflict(`A site with the schema name "${schema}" exists: restore it under another name (--as NAME), or delete that site first.`);
  // `config` is a path of its own (/api/cloud/sites/config/): never a site's slug (sites/site.create.ts).
  if (taken!.slug_site || slug === 'config') throw conflict(`A site with the slug "${slug}" exists: restore it under another name (--as NAME).`);
  if (namespace) throw conflict(`A schema named "${schema}" exists in the database: restore it under another name (--as NAME).`);
}

interface Work {
  manifest: Manifest;
  rows: PlatformRows;
  source: string;
  schema: string;
  slug: string;
  dumpFile: string;
  tools: ReturnType<typeof pgTools>;
  options: RestoreOptions;
  /** The cluster the site goes to (db/clusters.ts). */
  cluster: string;
}

/**
 * The schema on `site` (the target cluster's database) and the platform rows on `client` (the
 * primary), each in a transaction; on one database, one. With two, the schema's commits first;
 * should the platform rows' then fail, the schema is dropped again (a crash between leaves a
 * schema no site names: never routed; restoring again under that name refuses it until dropped).
 */
async function restoreInTransaction(client: pg.Client, site: pg.Client, w: Work): Promise<Omit<RestoreResult, 'blobs' | 'schema_version' | 'duration_ms'>> {
  const { schema, source } = w;
  const both = site === client ? [client] : [site, client];
  for (const c of both) await c.query('BEGIN');
  try {
    await site.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`tenant:${schema}`]);
    await assertFree(client, site, schema, w.slug);
    // pg_restore writes into the schema's archived name: when another schema holds that name (the
    // original site, restored beside itself), it steps aside inside this transaction (no one else
    // sees it go) and comes back before the commit.
    const parked = source !== schema && (await all(site, 'SELECT 1 FROM pg_namespace WHERE nspname = $1', [source])).length ? `_restore_${randomBytes(6).toString('hex')}` : undefined;
    if (parked) await site.query(`ALTER SCHEMA ${quotedSchema(source)} RENAME TO ${quotedSchema(parked)}`);
    for (const sql of TENANT_EXTENSIONS) await site.query(sql); // the dump names them (pg_trgm's operator classes) but does not carry them
    const { env } = connectionArgs(w.options.databaseUrl);
    for (const section of ['pre-data', 'data', 'post-data'] as const) {
      const run = runTool(w.tools.restore, ['--no-owner', '--no-privileges', `--section=${section}`, '--file', '-', w.dumpFile], env, 'pg_restore');
      try {
        await Promise.all([runScript(site, run.stdout), run.done]);
      } finally {
        run.stop();
      }
    }
    await site.query('RESET ALL'); // what the script SET (search_path ''), for the statements below
    if (source !== schema) {
      await site.query(`ALTER SCHEMA ${quotedSchema(source)} RENAME TO ${quotedSchema(schema)}`);
      if (parked) await site.query(`ALTER SCHEMA ${quotedSchema(parked)} RENAME TO ${quotedSchema(source)}`);
      await renamePolicies(site, source, schema);
      // The change log's trigger functions name their schema (tenant migration 16): written again under the new name.
      const [{ logged }] = (await site.query(`SELECT to_regprocedure(format('%I.record_changes_reattach(text)', $1::text)) IS NOT NULL AS logged`, [schema])).rows;
      if (logged) await site.query(`SELECT ${quotedSchema(schema)}.record_changes_reattach($1)`, [schema]);
    }
    await resealSecrets(site, w, source, schema);
    const result = await platformRows(client, site, w);
    await client.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, 'routing:']);
    await site.query('COMMIT');
    if (site !== client) {
      try {
        await client.query('COMMIT');
      } catch (err) {
        await site
          .query(`DROP SCHEMA IF EXISTS ${quotedSchema(schema)} CASCADE`)
          .then(() => site.query('DELETE FROM public.tenant_schemas WHERE schema_name = $1', [schema]))
          .catch(() => undefined);
        throw err;
      }
    }
    return result;
  } catch (err) {
    for (const c of both) await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/**
 * Runs a pg_restore script on `client`: the statements as simple queries, each `COPY … FROM stdin`
 * block through the COPY protocol (data lines never look like a statement: COPY's text format
 * escapes every backslash, so `\.` alone ends a block). pg_restore's `\restrict`/`\unrestrict`
 * lines (psql's guard against meta-commands in a dump) are psql's, not SQL: dropped.
 */
export async function runScript(client: pg.Client, script: Readable): Promise<void> {
  const copyHead = /^COPY (?:"(?:[^"]|"")*"|[^\s".]+)\.(?:"(?:[^"]|"")*"|[^\s".]+)(?: \(.*\))? FROM stdin;$/;
  let sql: string[] = [];
  const flush = async () => {
    const text = sql.join('\n');
    sql = [];
    if (text.trim()) await client.query(text);
  };
  let copy: CopyStreamQuery | undefined;
  let copied: Promise<unknown> | undefined;
  let batch: string[] = [];
  const send = async () => {
    if (batch.length && !copy!.write(`${batch.join('\n')}\n`)) await once(copy!, 'drain');
    batch = [];
  };
  for await (const line of createInterface({ input: script, crlfDelay: Infinity })) {
    if (copy) {
      if (line === '\\.') {
        await send();
        copy.end();
        await copied;
        copy = undefined;
      } else {
        batch.push(line);
        if (batch.length >= 1000) await send();
      }
    } else if (copyHead.test(line)) {
      await flush();
      copy = client.query(copyFrom(line));
      copied = once(copy, 'finish');
      copied.catch(() => undefined); // awaited at the block's end; a failure before that surfaces in write/drain
    } else if (!/^\\(un)?restrict [A-Za-z0-9]+$/.test(line)) {
      sql.push(line);
    }
  }
  if (copy) throw badArchive('its schema dump ends inside a COPY block.');
  await flush();
}

/** A policy's scope is `{schema}_{app}` and derived-role sets are prefixed with it (policies/portable.ts): renamed with the schema. */
async function renamePolicies(client: pg.Client, source: string, schema: string): Promise<void> {
  const q = quotedSchema(schema);
  const apps = await all<{ slug: string }>(client, `SELECT slug FROM ${q}.apps`);
  const scopes = apps.map((a) => [`${source}_${a.slug}`, `${schema}_${a.slug}`] as const);
  const renamed = (name: string): string => {
    for (const [from, to] of scopes) if (name === from || name.startsWith(`${from}_`)) return to + name.slice(from.length);
    return name;
  };
  const list = (names: string[] | undefined) => names?.map(renamed);
  for (const row of await all<{ id: string; document: PolicyDocument }>(client, `SELECT id, document FROM ${q}.policies`)) {
    const d = structuredClone(row.document);
    const p = d.resourcePolicy ?? d.rolePolicy ?? d.principalPolicy;
    if (p?.scope) p.scope = renamed(p.scope);
    if (d.resourcePolicy?.importDerivedRoles) d.resourcePolicy.importDerivedRoles = list(d.resourcePolicy.importDerivedRoles);
    if (d.derivedRoles) d.derivedRoles.name = renamed(d.derivedRoles.name);
    if (d.exportVariables) d.exportVariables.name = renamed(d.exportVariables.name);
    if (d.exportConstants) d.exportConstants.name = renamed(d.exportConstants.name);
    for (const holder of [d.resourcePolicy, d.rolePolicy, d.principalPolicy, d.derivedRoles]) {
      if (holder?.variables?.import) holder.variables.import = list(holder.variables.import);
      if (holder?.constants?.import) holder.constants.import = list(holder.constants.import);
    }
    const c = columnsOf(d);
    await client.query(`UPDATE ${q}.policies SET id = $1, name = $2, scope = $3, document = $4::jsonb WHERE id = $5`, [c.id, c.name, c.scope, JSON.stringify(d), row.id]);
  }
}

/**
 * Secret values and social login client secrets are sealed with their site's schema name as
 * associated data (secrets/crypto.ts): each is opened with the source's key and name, and sealed
 * again with this platform's keyring and the restored name. A value that does not open refuses
 * the restore (a wrong or missing --secret-key-env).
 */
async function resealSecrets(client: pg.Client, w: Work, source: string, schema: string): Promise<void> {
  const q = quotedSchema(schema);
  const target = w.options.keyring;
  const versions = await all<{ v: number | null }>(client, `SELECT greatest((SELECT max(key_version) FROM ${q}.secrets), (SELECT max(secret_key_version) FROM ${q}.social_apps)) AS v`);
  const from = w.options.sourceSecretKey ? new SecretKeyring(w.options.sourceSecretKey, Math.max(1, Number(versions[0]?.v ?? 1))) : target;
  const reseal = (ciphertext: string, version: number, before: string, after: string) => {
    try {
      return target.seal(from.open({ ciphertext, key_version: Number(version) }, before), after);
    } catch {
      throw new DomainError(
        'VALIDATION_ERROR',
        "The archive's secret values cannot be decrypted with this platform's PLATFORM_SECRET_KEY: restore with --secret-key-env naming a variable that holds the source platform's key. Nothing was changed.",
      );
    }
  };
  for (const s of await all<{ uuid: string; ciphertext: string; key_version: number }>(client, `SELECT uuid, ciphertext, key_version FROM ${q}.secrets`)) {
    const sealed = reseal(s.ciphertext, s.key_version, secretAad(source, s.uuid), secretAad(schema, s.uuid));
    await client.query(`UPDATE ${q}.secrets SET ciphertext = $1, key_version = $2 WHERE uuid = $3`, [sealed.ciphertext, sealed.key_version, s.uuid]);
  }
  for (const a of await all<{ uuid: string; secret_ciphertext: string; secret_key_version: number }>(client, `SELECT uuid, secret_ciphertext, secret_key_version FROM ${q}.social_apps`)) {
    const sealed = reseal(a.secret_ciphertext, a.secret_key_version, socialSecretAad(source, a.uuid), socialSecretAad(schema, a.uuid));
    await client.query(`UPDATE ${q}.social_apps SET secret_ciphertext = $1, secret_key_version = $2 WHERE uuid = $3`, [sealed.ciphertext, sealed.key_version, a.uuid]);
  }
}

/** A host held by a domain, a worker or the platform API. */
async function hostTaken(client: pg.Client, host: string, platformHosts: readonly string[]): Promise<boolean> {
  if (platformHosts.includes(host)) return true;
  return (await all(client, 'SELECT 1 FROM public.domains WHERE domain = $1 UNION ALL SELECT 1 FROM public.worker_hosts WHERE host = $1', [host])).length > 0;
}

async function freeDomainSlugOf(client: pg.Client, host: string): Promise<string> {
  const base = domainSlug(host);
  const taken = await all<{ slug: string }>(client, `SELECT slug FROM public.domains WHERE slug = $1 OR slug LIKE $2`, [base, `${base.replace(/[\\%_]/g, '\\$&')}-%`]);
  return nextSlug(base, taken.map((r) => r.slug));
}

/**
 * The platform rows: the site (its archived UUID when free), its schema's version, its domains,
 * its grants re-attached by e-mail (users) and name (groups), its linked users re-linked by
 * e-mail, its frontend workers' addresses. Hosts are never taken from anyone: see docs/backup.md.
 */
async function platformRows(client: pg.Client, site: pg.Client, w: Work): Promise<Omit<RestoreResult, 'blobs' | 'schema_version' | 'duration_ms'>> {
  const { rows, schema, slug } = w;
  const { settings } = w.options;
  const q = quotedSchema(schema);
  const orgRef = w.options.org ?? rows.organization.uuid;
  const [org] = await all<{ uuid: string; slug: string }>(client, 'SELECT uuid, slug FROM public.organizations WHERE uuid::text = $1 OR slug = $1 LIMIT 1', [orgRef]);
  if (!org) {
    throw new DomainError('NOT_FOUND', w.options.org ? `Organization "${w.options.org}" not found. Nothing was changed.` : `The archive's organization "${rows.organization.slug}" is not on this platform: name one with --org. Nothing was changed.`);
  }
  const uuidTaken = (await all(client, 'SELECT 1 FROM public.sites WHERE uuid = $1', [rows.site.uuid])).length > 0;
  const uuid = uuidTaken ? crypto.randomUUID() : rows.site.uuid;
  const name = w.options.as ?? rows.site.name;
  await client.query(
    `INSERT INTO public.sites (uuid, slug, name, description, schema_name, environment, is_active, site_settings, organization_uuid, cluster)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10)`,
    [uuid, slug, name, rows.site.description, schema, rows.site.environment, rows.site.is_active, JSON.stringify(rows.site.site_settings ?? {}), org.uuid, w.cluster],
  );
  // The schema's version lives beside it, on its cluster (db/clusters.ts).
  await site.query('INSERT INTO public.tenant_schemas (schema_name, version, migrated_at) VALUES ($1, $2, now())', [schema, w.manifest.schema_version]);

  // Domains: the site's own name under this platform's base domain is its primary; customer
  // domains come back unverified (they route nothing until their DNS record proves them again).
  const primary = `${slug}.${settings.baseDomain}`;
  if (await hostTaken(client, primary, settings.platformHosts)) throw conflict(`The host ${primary} (the restored site's primary domain) is taken.`);
  await client.query('INSERT INTO public.domains (uuid, slug, domain, is_primary, site_uuid, verified_at) VALUES ($1, $2, $3, true, $4, now())', [crypto.randomUUID(), await freeDomainSlugOf(client, primary), primary, uuid]);
  const domains: RestoreResult['domains'] = [];
  for (const d of rows.domains) {
    if (d.domain === primary) continue;
    if (underBaseDomain(d.domain, settings.baseDomain) || settings.platformHosts.includes(d.domain)) {
      domains.push({ domain: d.domain, restored: false, note: `a name under the platform's base domain: the site's own is ${primary}` });
    } else if (await hostTaken(client, d.domain, settings.platformHosts)) {
      domains.push({ domain: d.domain, restored: false, note: 'held by another site' });
    } else {
      await client.query('INSERT INTO public.domains (uuid, slug, domain, is_primary, is_active, site_uuid, verification_token) VALUES ($1, $2, $3, false, $4, $5, $6)', [
        crypto.randomUUID(), await freeDomainSlugOf(client, d.domain), d.domain, d.is_active, uuid, /^[0-9a-f]{32,64}$/.test(d.verification_token) ? d.verification_token : newVerificationToken(),
      ]);
      domains.push({ domain: d.domain, restored: true, note: 'unverified: verify it again (its DNS TXT record)' });
    }
  }

  // Grants, by the e-mail of their user or the name of their group on this platform.
  const missing: string[] = [];
  let attached = 0;
  for (const g of rows.grants) {
    const holder = g.email
      ? await all<{ id: string }>(client, 'SELECT uuid AS id FROM public.users WHERE lower(email) = lower($1) AND NOT is_deleted', [g.email])
      : await all<{ id: string }>(client, 'SELECT id::text AS id FROM public.groups WHERE lower(name) = lower($1)', [g.group ?? '']);
    if (!holder.length) {
      missing.push(`${g.email ?? `group ${g.group}`}: ${g.permission}`);
      continue;
    }
    const res = await client.query(
      `INSERT INTO public.object_permissions (user_uuid, group_id, permission_id, object_type, object_uuid)
       SELECT $1::uuid, $2::integer, p.id, 'site', $3 FROM public.permissions p WHERE p.codename = $4 ON CONFLICT DO NOTHING`,
      [g.email ? holder[0]!.id : null, g.email ? null : Number(holder[0]!.id), uuid, g.permission],
    );
    attached += res.rowCount ?? 0;
  }

  // Linked site users stand for platform users: the one with the same e-mail here, if any.
  const emails = rows.linked_users.map((l) => l.email.toLowerCase());
  const here = new Map((await all<{ uuid: string; email: string }>(client, 'SELECT uuid, lower(email) AS email FROM public.users WHERE lower(email) = ANY($1) AND NOT is_deleted', [emails])).map((u) => [u.email, u.uuid]));
  const moves = rows.linked_users.filter((l) => here.get(l.email.toLowerCase()) !== l.platform_user_uuid);
  if (moves.length) {
    // Unmatched ones point nowhere (their standing is then false: tenancy/linked-users.ts linkedAccount), never at someone else.
    const pairs = moves.map((l) => ({ old: l.platform_user_uuid, new: here.get(l.email.toLowerCase()) ?? crypto.randomUUID() }));
    await site.query(`UPDATE ${q}.users u SET platform_user_uuid = m.new FROM jsonb_to_recordset($1::jsonb) AS m(old uuid, new uuid) WHERE u.platform_user_uuid = m.old`, [JSON.stringify(pairs)]);
  }
  const unmatched = rows.linked_users.filter((l) => !here.has(l.email.toLowerCase())).map((l) => l.email);

  // Frontend workers: an internal worker's address is made again under this platform's base
  // domain (with a number added when another holds it); an external one's domain is unverified
  // now, so it gets no address until then.
  const workers: RestoreResult['workers'] = [];
  for (const wk of await all<{ id: number; uuid: string; slug: string; subdomain: string; is_internal: boolean }>(site, `SELECT id, uuid, slug, subdomain, is_internal FROM ${q}.frontend_workers ORDER BY id`)) {
    if (!wk.is_internal) {
      workers.push({ slug: wk.slug, host: null, note: 'external: not served until its domain is verified again and its address set (docs/backup.md)' });
      continue;
    }
    let host: string | undefined;
    let subdomain = wk.subdomain;
    for (let n = 1; n <= 20 && !host; n++) {
      subdomain = n === 1 ? wk.subdomain : `${wk.subdomain.slice(0, 60)}-${n}`;
      const candidate = workerHost({ subdomain, isInternal: true, domain: null }, settings.environment, settings.baseDomain);
      const mine = await all(site, `SELECT 1 FROM ${q}.frontend_workers WHERE host = $1 AND id <> $2`, [candidate, wk.id]);
      if (!mine.length && !(await hostTaken(client, candidate, settings.platformHosts))) host = candidate;
    }
    if (!host) throw conflict(`No free address for the frontend worker "${wk.slug}".`);
    // A worker's UUID names it platform-wide (worker_hosts): a copy beside its original gets a new one.
    const named = (await all(client, 'SELECT 1 FROM public.worker_hosts WHERE worker_uuid = $1', [wk.uuid])).length > 0;
    const [{ worker_uuid }] = await all<{ worker_uuid: string }>(
      site,
      `UPDATE ${q}.frontend_workers SET subdomain = $1, host = $2, uuid = CASE WHEN $4::boolean THEN gen_random_uuid() ELSE uuid END
        WHERE id = $3 RETURNING uuid AS worker_uuid`,
      [subdomain, host, wk.id, named],
    );
    await client.query('INSERT INTO public.worker_hosts (host, site_uuid, worker_uuid) VALUES ($1, $2, $3)', [host, uuid, worker_uuid]);
    workers.push({ slug: wk.slug, host, note: subdomain === wk.subdomain ? '' : `its subdomain was taken: now ${subdomain}` });
  }
  return {
    site: { uuid, name, slug, schema_name: schema },
    organization: org.slug,
    primary_domain: primary,
    domains,
    grants: { attached, missing },
    linked_users: { relinked: rows.linked_users.length - unmatched.length, unmatched },
    workers,
  };
}
