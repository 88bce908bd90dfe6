// Secrets of a site ("<schema>".secrets): values encrypted at rest (crypto.ts), masked in
// lists, decrypted only by GET of one secret. An app's secret overrides the tenant-wide one
// of the same key; GET ?app= falls back to the tenant-wide one and says so. Every create,
// update and delete is recorded in secret_history (who and when, never the value). Decided on
// the Secret subject (its app and key): the site's admins, and holders of the site permissions
// view_/add_/change_/delete_secret (auth/actor.ts).
// Module functions; the keyring (the key material) is an explicit argument of the calls that
// seal or open values, never a global.
import type { EntityManager } from '@mikro-orm/postgresql';
import { likeEscape } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { uniqueViolation } from '../common/slug.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { fieldError, notFound } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { actorLabel } from '../tenancy/tenant-auth.ts';
import { secretAad, type SecretKeyring } from './crypto.ts';
import { checkValue, findSecretType, type SecretTypeRow } from './secret-type.service.ts';
import {
  MASK, MASKS, MAX_VALUE_BYTES, SecretAppQuery, SecretCreate, SecretHistoryQuery, SecretListQuery, SecretUpdate,
  type SecretHistoryItem, type SecretListItem, type SecretView,
} from './secret.schemas.ts';
import { countOf, firstRow, iso, rows } from '../db/sql.ts';

interface SecretRow {
  uuid: string;
  key: string;
  app_slug: string | null;
  secret_type_uuid: string | null;
  type_slug: string | null;
  description: string;
  created: Date | string;
  modified: Date | string;
  created_by: string;
  modified_by: string;
  ciphertext?: string;
  key_version?: number;
}

// Lists never select the ciphertext.
const LIST_COLUMNS = 's.uuid, s.key, s.app_slug, s.secret_type_uuid, t.slug AS type_slug, s.description, s.created, s.modified, s.created_by, s.modified_by';
const from = (q: string) => `FROM ${q}.secrets s LEFT JOIN ${q}.secret_types t ON t.uuid = s.secret_type_uuid`;

const listItem = (r: SecretRow): SecretListItem => ({
  uuid: r.uuid,
  key: r.key,
  app: r.app_slug,
  secret_type: r.type_slug,
  description: r.description,
  value: MASK,
  created: iso(r.created),
  modified: iso(r.modified),
  created_by: r.created_by,
  modified_by: r.modified_by,
});

/** The JSON text of a value, checked: not null, not too large. */
function serialise(value: unknown): string {
  if (value === null || value === undefined) throw fieldError('value', 'This field may not be null.');
  const text = JSON.stringify(value);
  if (Buffer.byteLength(text, 'utf8') > MAX_VALUE_BYTES) throw fieldError('value', `Ensure the value has no more than ${MAX_VALUE_BYTES} bytes as JSON.`);
  return text;
}

async function exact(em: EntityManager, schema: string, key: string, app: string | null, withValue = false): Promise<SecretRow | undefined> {
  const cols = withValue ? `${LIST_COLUMNS}, s.ciphertext, s.key_version` : LIST_COLUMNS;
  const params = app === null ? [key] : [key, app];
  return firstRow<SecretRow>(em, `SELECT ${cols} ${from(quotedSchema(schema))} WHERE s.key = ? AND ${app === null ? 's.app_slug IS NULL' : 's.app_slug = ?'}`, params);
}

const secretNotFound = (key: string, app: string | null) =>
  notFound({ message: app === null ? `Secret "${key}" not found.` : `Secret "${key}" not found for app "${app}".` });

async function resolveType(em: EntityManager, schema: string, ref: string): Promise<SecretTypeRow> {
  const type = await findSecretType(em, schema, ref);
  if (!type) throw fieldError('secret_type', `Unknown secret type "${ref}".`);
  return type;
}

async function record(em: EntityManager, schema: string, row: { uuid: string; key: string; app_slug: string | null }, action: 'create' | 'update' | 'delete', actor: string) {
  await em.execute(`INSERT INTO ${quotedSchema(schema)}.secret_history (secret_uuid, key, app_slug, action, actor) VALUES (?, ?, ?, ?, ?)`, [
    row.uuid, row.key, row.app_slug, action, actor,
  ]);
}

const decrypt = (keyring: SecretKeyring, schema: string, row: Pick<SecretRow, 'uuid' | 'ciphertext' | 'key_version'>): unknown =>
  JSON.parse(keyring.open({ ciphertext: row.ciphertext!, key_version: Number(row.key_version) }, secretAad(schema, row.uuid)));

/** A secret as stored, encrypted (openSecrets decrypts it). */
export interface StoredSecret {
  key: string;
  uuid: string;
  ciphertext: string;
  key_version: number;
}

/**
 * The statement selecting the secrets of `keys` (SQL: a set of keys) that the app `appSlug` (SQL)
 * sees — its own of that key, else the tenant-wide one (as GET ?app= resolves): StoredSecret rows,
 * keys without a secret absent. For the platform's own use (a function's environment): no
 * permission check, the caller has made its own.
 */
export const appSecretsSql = (q: string, keys: string, appSlug: string): string =>
  `SELECT DISTINCT ON (key) key, uuid, ciphertext, key_version FROM ${q}.secrets WHERE key IN (${keys}) AND (app_slug = ${appSlug} OR app_slug IS NULL) ORDER BY key, app_slug NULLS LAST`;

/** Which of `keys` app `appSlug` has a secret of (appSecretsSql), in one query. */
export async function appSecretKeys(em: EntityManager, schema: string, appSlug: string, keys: string[]): Promise<Set<string>> {
  if (!keys.length) return new Set();
  const found = await rows<StoredSecret>(em, appSecretsSql(quotedSchema(schema), '?', '?'), [[...new Set(keys)], appSlug]);
  return new Set(found.map((r) => r.key));
}

/** Stored secrets (appSecretsSql's rows) decrypted, by key. */
export function openSecrets(keyring: SecretKeyring, schema: string, found: StoredSecret[]): Map<string, unknown> {
  return new Map(found.map((r) => [r.key, decrypt(keyring, schema, r)]));
}

export async function listSecrets(ctx: ServiceContext, rawQuery: unknown): Promise<Page<SecretListItem>> {
  const schema = await siteSchemaFor(ctx, 'read', 'Secret');
  const query = validate(SecretListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const where: string[] = ['true'];
  const params: unknown[] = [];
  if (query.app) {
    where.push('s.app_slug = ?');
    params.push(query.app);
  }
  if (query.secret_type) {
    where.push('t.slug = ?');
    params.push(query.secret_type);
  }
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    where.push('(s.key ILIKE ? OR s.description ILIKE ?)');
    params.push(like, like);
  }
  const base = `${from(quotedSchema(schema))} WHERE ${where.join(' AND ')}`;
  const count = await countOf(ctx.em, `SELECT count(*) AS n ${base}`, params);
  const page = resolvePage(pageReq, count);
  const order = { key: 's.key ASC', '-key': 's.key DESC', created: 's.created ASC', '-created': 's.created DESC', modified: 's.modified ASC', '-modified': 's.modified DESC' }[
    query.ordering ?? 'key'
  ];
  const found = await rows<SecretRow>(ctx.em, `SELECT ${LIST_COLUMNS} ${base} ORDER BY ${order}, s.app_slug ASC NULLS FIRST, s.uuid LIMIT ? OFFSET ?`, [
    ...params, page.pageSize, pageOffset(page),
  ]);
  return { ...page, count, results: found.map(listItem) };
}

/** Creates a secret; the response masks the value (GET the secret to read it). */
export async function createSecret(ctx: ServiceContext, keyring: SecretKeyring, rawInput: unknown): Promise<SecretListItem> {
  const schema = await siteSchemaFor(ctx, 'create', 'Secret');
  const input = validate(SecretCreate, rawInput);
  const text = serialise(input.value);
  const type = input.secret_type ? await resolveType(ctx.em, schema, input.secret_type) : undefined;
  checkValue(type, input.value);
  const app = input.app ?? null;
  await authorizeSiteSubject(ctx, 'create', 'Secret', { schema, app, key: input.key });
  if (app !== null && !(await firstRow(ctx.em, `SELECT 1 FROM ${quotedSchema(schema)}.apps WHERE slug = ?`, [app]))) {
    throw fieldError('app', `No app "${app}" in this site.`);
  }
  const uuid = crypto.randomUUID();
  const sealed = keyring.seal(text, secretAad(schema, uuid));
  const actor = actorLabel(ctx.actor);
  const q = quotedSchema(schema);
  try {
    await ctx.em.transactional(async (tx) => {
      await tx.execute(
        `INSERT INTO ${q}.secrets (uuid, key, app_slug, secret_type_uuid, description, ciphertext, key_version, created_by, modified_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [uuid, input.key, app, type?.uuid ?? null, input.description ?? '', sealed.ciphertext, sealed.key_version, actor, actor],
      );
      await record(tx as EntityManager, schema, { uuid, key: input.key, app_slug: app }, 'create', actor);
    });
  } catch (err) {
    const constraint = uniqueViolation(err);
    if (constraint === 'secrets_tenant_key' || constraint === 'secrets_app_key') {
      throw fieldError('key', app === null ? 'A tenant-wide secret with this key already exists.' : `A secret with this key already exists for app "${app}".`);
    }
    throw err;
  }
  return listItem((await exact(ctx.em, schema, input.key, app))!);
}

/** The secret with its decrypted value; with `app`, the app's own or else the tenant-wide one. */
export async function getSecret(ctx: ServiceContext, keyring: SecretKeyring, key: string, rawQuery: unknown = {}): Promise<SecretView> {
  const schema = await siteSchemaFor(ctx, 'read', 'Secret');
  const { app } = validate(SecretAppQuery, rawQuery, 'query');
  let row = app ? await exact(ctx.em, schema, key, app, true) : undefined;
  let inherited: 'tenant' | null = null;
  if (!row) {
    row = await exact(ctx.em, schema, key, null, true);
    if (row && app) inherited = 'tenant';
  }
  if (!row) throw secretNotFound(key, app ?? null);
  await authorizeSiteSubject(ctx, 'read', 'Secret', { schema, app: row.app_slug, key: row.key });
  const { value: _masked, ...rest } = listItem(row);
  return { ...rest, value: decrypt(keyring, schema, row), inherited_from: inherited };
}

/** Updates the secret of exactly this key and app (an inherited one is not the app's: 404). */
export async function updateSecret(ctx: ServiceContext, keyring: SecretKeyring, key: string, rawQuery: unknown, rawInput: unknown): Promise<SecretListItem> {
  const schema = await siteSchemaFor(ctx, 'update', 'Secret');
  const { app } = validate(SecretAppQuery, rawQuery, 'query');
  const input = validate(SecretUpdate, rawInput);
  const row = await exact(ctx.em, schema, key, app ?? null, true);
  if (!row) throw secretNotFound(key, app ?? null);
  await authorizeSiteSubject(ctx, 'update', 'Secret', { schema, app: row.app_slug, key: row.key });
  dropReadOnly(SecretUpdate, input, { ...listItem(row), inherited_from: null });
  if (MASKS.includes(input.value)) delete input.value;
  const text = input.value !== undefined ? serialise(input.value) : undefined;
  let type: SecretTypeRow | undefined;
  if (input.secret_type === undefined) type = row.secret_type_uuid ? await findSecretType(ctx.em, schema, row.secret_type_uuid) : undefined;
  else if (input.secret_type !== null) type = await resolveType(ctx.em, schema, input.secret_type);
  // A new type must accept the value too: the new one, or the stored one.
  if (text !== undefined) checkValue(type, input.value);
  else if (input.secret_type) checkValue(type, decrypt(keyring, schema, row));
  const sealed = text !== undefined ? keyring.seal(text, secretAad(schema, row.uuid)) : undefined;
  const actor = actorLabel(ctx.actor);
  await ctx.em.transactional(async (tx) => {
    await tx.execute(
      `UPDATE ${quotedSchema(schema)}.secrets
          SET ciphertext = coalesce(?, ciphertext), key_version = coalesce(?, key_version), secret_type_uuid = ?,
              description = coalesce(?, description), modified = now(), modified_by = ?
        WHERE uuid = ?`,
      [sealed?.ciphertext ?? null, sealed?.key_version ?? null, type?.uuid ?? null, input.description ?? null, actor, row.uuid],
    );
    await record(tx as EntityManager, schema, row, 'update', actor);
  });
  return listItem((await exact(ctx.em, schema, key, app ?? null))!);
}

export async function deleteSecret(ctx: ServiceContext, key: string, rawQuery: unknown = {}): Promise<void> {
  const schema = await siteSchemaFor(ctx, 'delete', 'Secret');
  const { app } = validate(SecretAppQuery, rawQuery, 'query');
  const row = await exact(ctx.em, schema, key, app ?? null);
  if (!row) throw secretNotFound(key, app ?? null);
  await authorizeSiteSubject(ctx, 'delete', 'Secret', { schema, app: row.app_slug, key: row.key });
  await ctx.em.transactional(async (tx) => {
    await tx.execute(`DELETE FROM ${quotedSchema(schema)}.secrets WHERE uuid = ?`, [row.uuid]);
    await record(tx as EntityManager, schema, row, 'delete', actorLabel(ctx.actor));
  });
}

/** Newest first; kept after the secret is deleted. 404 when the key (for that app) never existed. */
export async function secretHistory(ctx: ServiceContext, key: string, rawQuery: unknown = {}): Promise<Page<SecretHistoryItem>> {
  const schema = await siteSchemaFor(ctx, 'read', 'Secret');
  const query = validate(SecretHistoryQuery, rawQuery, 'query');
  const app = query.app ?? null;
  await authorizeSiteSubject(ctx, 'read', 'Secret', { schema, app, key });
  const pageReq = parsePageRequest(query);
  const where = `FROM ${quotedSchema(schema)}.secret_history WHERE key = ? AND ${app === null ? 'app_slug IS NULL' : 'app_slug = ?'}`;
  const params = app === null ? [key] : [key, app];
  const count = await countOf(ctx.em, `SELECT count(*) AS n ${where}`, params);
  if (!count) throw secretNotFound(key, app);
  const page = resolvePage(pageReq, count);
  const found = await rows<{ id: string | number; action: 'create' | 'update' | 'delete'; key: string; app_slug: string | null; actor: string; at: Date | string }>(
    ctx.em,
    `SELECT id, action, key, app_slug, actor, at ${where} ORDER BY at DESC, id DESC LIMIT ? OFFSET ?`,
    [...params, page.pageSize, pageOffset(page)],
  );
  return { ...page, count, results: found.map((r) => ({ id: Number(r.id), action: r.action, key: r.key, app: r.app_slug, actor: r.actor, at: iso(r.at) })) };
}
