// `platform site backup` (docs/backup.md): one site's schema, its platform rows and its blobs in
// one archive, consistent as of one moment. Everything read from PostgreSQL is read in one
// REPEATABLE READ READ ONLY transaction whose snapshot pg_dump shares (--snapshot); the blobs
// are those that snapshot's rows name. Blob keys are never reused (an upload writes a new key, a
// worker blob's key is its SHA-256), so a blob read later is the bytes the snapshot meant, or
// gone: a blob that a concurrent replace, delete or collection removed fails the backup (run it
// again), and no archive is left (it is written as FILE.partial and renamed at the end).
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import pg from 'pg';
import { siteNotFound } from '../errors.ts';
import { blobKey } from '../workers/deploy.ts';
import { BlobNotFound, type ObjectStore } from '../storage/objstore/types.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { operatorSiteRef } from '../sites/lookup.ts';
import { ARCHIVE_FORMAT, ARCHIVE_FORMAT_VERSION, ArchiveWriter, DUMP_ENTRY, PLATFORM_ENTRY, type Manifest } from './archive.ts';
import { connectionArgs, pgTools, runTool, queryRows as all } from './pg-tools.ts';

/** The site's rows of the platform tables, as the archive carries them (platform.json). */
export interface PlatformRows {
  site: { uuid: string; name: string; slug: string; description: string; schema_name: string; environment: string; is_active: boolean; site_settings: Record<string, unknown> };
  organization: { uuid: string; slug: string; name: string };
  domains: { domain: string; is_primary: boolean; is_active: boolean; verification_token: string; verified: boolean }[];
  /** Site permissions held by platform users (by e-mail) and groups (by name). */
  grants: { email: string | null; group: string | null; permission: string }[];
  /** The platform users the site's linked users stand for, by e-mail. */
  linked_users: { platform_user_uuid: string; email: string }[];
}

export interface BackupProgress {
  phase: 'dump' | 'blobs' | 'done';
  done: number;
  total: number;
  bytes: number;
}

export interface BackupOptions {
  databaseUrl: string;
  pgBinDir?: string;
  store: ObjectStore;
  onProgress?: (p: BackupProgress) => void;
}

export interface BackupResult {
  file: string;
  site: Manifest['site'];
  schema_version: number;
  blobs: number;
  bytes: number;
  duration_ms: number;
}

type Client = pg.Client;

async function platformRows(client: Client, siteRef: string): Promise<PlatformRows> {
  const [site] = await all<PlatformRows['site'] & { organization_uuid: string }>(
    client,
    `SELECT uuid, name, slug, description, schema_name, environment, is_active, site_settings, organization_uuid FROM public.sites WHERE ${operatorSiteRef('$1')}`,
    [siteRef],
  );
  if (!site) throw siteNotFound(siteRef);
  const { organization_uuid, ...rest } = site;
  const [organization] = await all<PlatformRows['organization']>(client, 'SELECT uuid, slug, name FROM public.organizations WHERE uuid = $1', [organization_uuid]);
  return {
    site: rest,
    organization: organization!,
    domains: await all(client, 'SELECT domain, is_primary, is_active, verification_token, verified_at IS NOT NULL AS verified FROM public.domains WHERE site_uuid = $1 ORDER BY domain', [site.uuid]),
    grants: await all(
      client,
      `SELECT u.email, g.name AS group, p.codename AS permission FROM public.object_permissions o
         JOIN public.permissions p ON p.id = o.permission_id
         LEFT JOIN public.users u ON u.uuid = o.user_uuid LEFT JOIN public.groups g ON g.id = o.group_id
        WHERE o.object_type = 'site' AND o.object_uuid = $1 ORDER BY o.id`,
      [site.uuid],
    ),
    linked_users: [], // read on the site's cluster (linkedUsers)
  };
}

/** The blobs the snapshot's rows name: objects' bytes, worker build files (and their compressed variants), stored app packages. */
/** The platform users the site's linked users stand for (their UUIDs on the site's cluster, their e-mails on the primary). */
async function linkedUsers(site: Client, platform: Client, schema: string): Promise<PlatformRows['linked_users']> {
  const linked = (await all<{ id: string }>(site, `SELECT DISTINCT platform_user_uuid::text AS id FROM ${quotedSchema(schema)}.users WHERE platform_user_uuid IS NOT NULL`)).map((r) => r.id);
  if (!linked.length) return [];
  return all(platform, `SELECT uuid AS platform_user_uuid, email FROM public.users WHERE uuid::text = ANY($1) AND email <> '' ORDER BY email`, [linked]);
}

async function blobsOf(client: Client, schema: string): Promise<{ key: string; content_type: string }[]> {
  const q = quotedSchema(schema);
  const objects = await all<{ key: string; content_type: string }>(client, `SELECT blob_key AS key, mimetype AS content_type FROM ${q}.storage_objects ORDER BY id`);
  const workers = await all<{ sha256: string; br: boolean; gz: boolean }>(client, `SELECT sha256, br IS NOT NULL AS br, gz IS NOT NULL AS gz FROM ${q}.frontend_worker_blobs WHERE stored ORDER BY sha256`);
  const packages = await all<{ key: string }>(client, `SELECT package_key AS key FROM ${q}.app_export_jobs WHERE package_key IS NOT NULL ORDER BY id`);
  const octets = 'application/octet-stream';
  return [
    ...objects,
    ...workers.flatMap((w) => [blobKey(w.sha256), ...(w.br ? [blobKey(w.sha256, 'br')] : []), ...(w.gz ? [blobKey(w.sha256, 'gzip')] : [])].map((key) => ({ key, content_type: octets }))),
    ...packages.map((p) => ({ key: p.key, content_type: 'application/zip' })),
  ];
}

/** Backs up the site `siteRef` (slug, schema name or UUID) into the tar file `out`. */
export async function backupSite(siteRef: string, out: string, options: BackupOptions): Promise<BackupResult> {
  const started = Date.now();
  const progress = options.onProgress ?? (() => undefined);
  const client = new pg.Client({ connectionString: options.databaseUrl });
  await client.connect();
  let site = client; // the site's cluster (db/clusters.ts): the primary, or a connection of its own
  const partial = `${out}.partial`;
  const dumpFile = `${out}.dump.partial`;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const rows = await platformRows(client, siteRef);
    const schema = rows.site.schema_name;
    const [{ name: platformVersion }] = await all<{ name: string }>(client, 'SELECT name FROM public.platform_migrations ORDER BY id DESC LIMIT 1');
    // A site on another cluster: its schema, version and blobs are read there, in a snapshot of
    // that cluster's (the platform rows are the primary's: two clusters share no snapshot).
    const [{ url: siteUrl }] = await all<{ url: string | null }>(
      client,
      'SELECT coalesce(c.direct_url, c.url) AS url FROM public.sites s JOIN public.clusters c ON c.name = s.cluster WHERE s.uuid = $1',
      [rows.site.uuid],
    );
    const dumpUrl = siteUrl ?? options.databaseUrl;
    if (siteUrl) {
      site = new pg.Client({ connectionString: siteUrl });
      await site.connect();
      await site.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    }
    const [{ snapshot }] = await all<{ snapshot: string }>(site, 'SELECT pg_export_snapshot() AS snapshot');
    const [{ version }] = await all<{ version: number }>(site, 'SELECT coalesce((SELECT version FROM public.tenant_schemas WHERE schema_name = $1), 0) AS version', [schema]);
    const [{ server_version_num }] = await all<{ server_version_num: string }>(site, 'SHOW server_version_num');
    const blobs = await blobsOf(site, schema);
    rows.linked_users = await linkedUsers(site, client, schema);

    // pg_dump reads through the same snapshot while this transaction keeps it alive.
    const tools = pgTools(Number(server_version_num), options.pgBinDir);
    const { dbname, env } = connectionArgs(dumpUrl);
    progress({ phase: 'dump', done: 0, total: 1, bytes: 0 });
    await runTool(tools.dump, ['--dbname', dbname, `--snapshot=${snapshot}`, `--schema=${schema}`, '--format=custom', '--no-owner', '--no-privileges', '--file', dumpFile], env, 'pg_dump').done;
    await client.query('COMMIT'); // the blobs are read outside the snapshot: their keys are never reused
    if (site !== client) await site.query('COMMIT');

    const file = createWriteStream(partial);
    const writer = await ArchiveWriter.open(file);
    let bytes = 0;
    const count = (n: number) => (bytes += n);
    const dumpSize = (await stat(dumpFile)).size;
    await writer.add(DUMP_ENTRY, dumpSize, createReadStream(dumpFile), {}, count);
    progress({ phase: 'dump', done: 1, total: 1, bytes });
    const json = Buffer.from(JSON.stringify(rows));
    await writer.add(PLATFORM_ENTRY, json.length, json);
    const store = options.store.site(schema);
    let done = 0;
    let last = 0;
    for (const blob of blobs) {
      const found = await store.stat(blob.key);
      if (!found) throw vanished(blob.key);
      const body = await store.get(blob.key).catch((err: unknown) => {
        throw err instanceof BlobNotFound ? vanished(blob.key) : err;
      });
      await writer.add(`blobs/${String(done + 1).padStart(8, '0')}`, found.size, body, { key: blob.key, content_type: blob.content_type }, count);
      done++;
      if (Date.now() - last > 500 || done === blobs.length) {
        last = Date.now();
        progress({ phase: 'blobs', done, total: blobs.length, bytes });
      }
    }
    const manifest = await writer.finish({
      format: ARCHIVE_FORMAT,
      format_version: ARCHIVE_FORMAT_VERSION,
      platform_schema_version: platformVersion,
      site: { uuid: rows.site.uuid, name: rows.site.name, slug: rows.site.slug, schema_name: schema },
      schema_version: Number(version),
      postgres_major: tools.major,
      created_at: new Date().toISOString(),
    });
    await rename(partial, out);
    progress({ phase: 'done', done: blobs.length, total: blobs.length, bytes });
    return { file: out, site: manifest.site, schema_version: manifest.schema_version, blobs: blobs.length, bytes: (await stat(out)).size, duration_ms: Date.now() - started };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    if (site !== client) await site.query('ROLLBACK').catch(() => undefined);
    await rm(partial, { force: true });
    throw err;
  } finally {
    await rm(dumpFile, { force: true });
    await client.end().catch(() => undefined);
    if (site !== client) await site.end().catch(() => undefined);
  }
}

const vanished = (key: string) => new Error(`The blob "${key}" was removed while the backup ran (the site changed: an object replaced or deleted, a build collected). No archive was written; run the backup again.`);
