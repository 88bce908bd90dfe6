// Social apps of a site (spec Part 1 §2, §4 "Social apps"; docs/social-login.md): the public list,
// and create / retrieve / update / delete decided on the SocialApp subject (auth/actor.ts: the
// site's superusers — the organization's owners and admins are theirs — manage; every user of
// the site reads). The client secret is sealed like a secret value (secrets/crypto.ts), AAD
// bound to the site and the app's uuid; it is echoed once on create and masked afterwards.
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { likeEscape } from '../common/filters.ts';
import { uniqueViolation } from '../common/slug.ts';
import { countOf, firstRow, rows } from '../db/sql.ts';
import type { ServiceContext } from '../context.ts';
import { DomainError, addFieldError, notFound, validationError, type FieldErrors } from '../errors.ts';
import { OutboundError, type OutboundGuard } from '../net/outbound.ts';
import type { SecretKeyring } from '../secrets/crypto.ts';
import { MASKS } from '../secrets/secret.schemas.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { siteSchemaFor } from '../tenancy/site-access.ts';
import { PROVIDER_IDS, providerInfo, serverUrl } from './providers.ts';

export const HIDDEN = '***HIDDEN***';
const FIELDS = ['provider', 'provider_id', 'name', 'client_id', 'secret', 'key', 'settings'] as const;
/** `provider_id`: it names the app in `/api/auth/{provider_id}/…`, so it is a path segment of its own. */
const PROVIDER_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** Path segments of /api/auth/ that are routes, not apps. */
const RESERVED_KEYS = new Set(['jwt', 'social-apps', 'session', 'sessions']);

export interface SocialAppRow {
  id: number;
  uuid: string;
  provider: string;
  provider_id: string;
  name: string;
  client_id: string;
  secret_ciphertext: string;
  secret_key_version: number;
  key: string;
  settings: Record<string, unknown>;
}

export interface SocialAppView {
  id: number;
  provider: string;
  provider_id: string;
  name: string;
  client_id: string;
  secret: string;
  key: string;
  settings: Record<string, unknown>;
  provider_display: string;
  is_configured: boolean;
}

export interface SocialAppListItem {
  id: number;
  provider: string;
  provider_id: string;
  name: string;
  provider_display: string;
  is_configured: boolean;
  icon: string | null;
  auto_redirect: boolean;
}

const COLUMNS = 'id, uuid, provider, provider_id, name, client_id, secret_ciphertext, secret_key_version, key, settings';
export const socialSecretAad = (schema: string, uuid: string): string => `social_app:${schema}:${uuid}`;

function isConfigured(row: Pick<SocialAppRow, 'provider' | 'client_id' | 'settings'>, hasSecret: boolean): boolean {
  const info = providerInfo(row.provider);
  if (!info || !row.client_id || !hasSecret || !serverUrl(info, row.settings)) return false;
  return info.requiredSettings.every((k) => row.settings[k] !== undefined && row.settings[k] !== '');
}

function view(row: SocialAppRow, secret: string = HIDDEN): SocialAppView {
  return {
    id: row.id,
    provider: row.provider,
    provider_id: row.provider_id,
    name: row.name,
    client_id: row.client_id,
    secret,
    key: row.key,
    settings: row.settings,
    provider_display: providerInfo(row.provider)?.display ?? row.provider,
    is_configured: isConfigured(row, row.secret_ciphertext !== ''),
  };
}

/** The social app a login path names (`provider_id`, else the provider), or 404. */
export async function appByLoginKey(em: EntityManager, schema: string, key: string): Promise<SocialAppRow> {
  const row = await firstRow<SocialAppRow>(em, `SELECT ${COLUMNS} FROM ${quotedSchema(schema)}.social_apps WHERE login_key = ?`, [key]);
  if (!row) throw notFound({ message: `No social app "${key}" on this site.` });
  return row;
}

async function findApp(em: EntityManager, schema: string, id: string): Promise<SocialAppRow> {
  if (!/^\d{1,9}$/.test(id)) throw notFound('Social app');
  const row = await firstRow<SocialAppRow>(em, `SELECT ${COLUMNS} FROM ${quotedSchema(schema)}.social_apps WHERE id = ?`, [Number(id)]);
  if (!row) throw notFound('Social app');
  return row;
}

export function openSecret(keyring: SecretKeyring, schema: string, row: SocialAppRow): string {
  return keyring.open({ ciphertext: row.secret_ciphertext, key_version: row.secret_key_version }, socialSecretAad(schema, row.uuid));
}

// ---- validation --------------------------------------------------------------------------------

type Input = Partial<Record<(typeof FIELDS)[number], unknown>>;

/**
 * The whole app after applying `input` to `current` (none on create): field-keyed messages as §4
 * says — missing fields, the registered providers named, `provider_id` and `settings.server_url`
 * for `openid_connect`. A secret sent back masked means "unchanged".
 */
function checkInput(raw: unknown, current?: SocialAppRow): { merged: Omit<SocialAppRow, 'id' | 'uuid' | 'secret_ciphertext' | 'secret_key_version'>; secret?: string } {
  const errors: FieldErrors = {};
  const add = (field: string, message: string) => addFieldError(errors, field, message);
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw validationError({ non_field_errors: ['Invalid data. Expected a JSON object.'] });
  const input = raw as Input & Record<string, unknown>;
  for (const field of Object.keys(input)) {
    if (!(FIELDS as readonly string[]).includes(field) && !['id', 'provider_display', 'is_configured'].includes(field)) add(field, 'Unknown field.');
  }
  const str = (field: 'provider' | 'provider_id' | 'name' | 'client_id' | 'secret' | 'key', max: number): string | undefined => {
    const v = input[field];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') return void add(field, 'Not a valid string.');
    if (v.length > max) return void add(field, `Ensure this field has no more than ${max} characters.`);
    return v.trim();
  };
  const provider = str('provider', 64) ?? current?.provider;
  const providerId = str('provider_id', 64) ?? current?.provider_id ?? '';
  const name = str('name', 100) ?? current?.name;
  const clientId = str('client_id', 255) ?? current?.client_id;
  const key = str('key', 255) ?? current?.key ?? '';
  let secret = str('secret', 8192);
  if (secret !== undefined && current && MASKS.includes(secret)) secret = undefined;
  let settings = current?.settings ?? {};
  if (input.settings !== undefined) {
    if (!input.settings || typeof input.settings !== 'object' || Array.isArray(input.settings)) add('settings', 'Must be a JSON object.');
    else settings = input.settings as Record<string, unknown>;
  }
  for (const [field, value] of [['provider', provider], ['name', name], ['client_id', clientId]] as const) {
    if (!value && !errors[field]) add(field, input[field] === undefined ? 'This field is required.' : 'This field may not be blank.');
  }
  if (!current && !secret && !errors.secret) add('secret', input.secret === undefined ? 'This field is required.' : 'This field may not be blank.');
  const info = provider ? providerInfo(provider) : undefined;
  if (provider && !info && !errors.provider) add('provider', `"${provider}" is not a registered provider. Available providers: ${PROVIDER_IDS.join(', ')}.`);
  if (info) {
    if (info.needsProviderId && !providerId) add('provider_id', `This field is required when provider is "${info.id}".`);
    if (!info.needsProviderId && providerId) add('provider_id', `Must be empty for provider "${info.id}" (the app is named by its provider).`);
    if (providerId && !PROVIDER_ID_PATTERN.test(providerId)) add('provider_id', 'Lowercase letters, digits, _ and -, starting with a letter or digit (at most 64 characters).');
    for (const k of info.requiredSettings) {
      if (typeof settings[k] !== 'string' || !settings[k]) add('settings', `"${k}" is required in settings for provider "${info.id}".`);
    }
  }
  if (RESERVED_KEYS.has(providerId || provider || '')) add(providerId ? 'provider_id' : 'provider', `"${providerId || provider}" is reserved (a route of /api/auth/).`);
  checkSettings(settings, add);
  if (Object.keys(errors).length) throw validationError(errors);
  return { merged: { provider: provider!, provider_id: providerId, name: name!, client_id: clientId!, key, settings }, secret };
}

function checkSettings(settings: Record<string, unknown>, add: (field: string, message: string) => void): void {
  if (settings.server_url !== undefined) {
    let ok = false;
    try {
      ok = typeof settings.server_url === 'string' && ['https:', 'http:'].includes(new URL(settings.server_url).protocol);
    } catch {
      ok = false;
    }
    if (!ok) add('settings', '"server_url" must be an http(s) URL (the issuer, or its discovery document).');
  }
  if (settings.icon !== undefined && typeof settings.icon !== 'string') add('settings', '"icon" must be a string (a URL or an icon name).');
  if (settings.auto_redirect !== undefined && typeof settings.auto_redirect !== 'boolean') add('settings', '"auto_redirect" must be true or false.');
  if (JSON.stringify(settings).length > 16_384) add('settings', 'At most 16 KiB as JSON.');
}

/**
 * A new `server_url` checked against the outbound guard's rules at write time (the run-time
 * check on every request is what protects; this one says it early): 400 on `settings` when it
 * names an address or port the platform does not connect to. A name that does not resolve (yet)
 * is accepted.
 */
async function checkServerUrl(outbound: OutboundGuard, settings: Record<string, unknown>, current?: SocialAppRow): Promise<void> {
  const url = settings.server_url;
  if (typeof url !== 'string' || !url || url === current?.settings.server_url) return;
  try {
    await outbound.destination(new URL(url));
  } catch (err) {
    if (err instanceof OutboundError && err.reason === 'refused') throw validationError({ settings: [`"server_url": ${err.message}`] });
    if (!(err instanceof OutboundError)) throw err;
  }
}

function duplicate(err: unknown): DomainError | undefined {
  if (uniqueViolation(err)?.includes('login_key')) {
    return validationError({ provider_id: ['A social app with this provider_id (or, without one, this provider) already exists on this site.'] });
  }
  return undefined;
}

// ---- operations --------------------------------------------------------------------------------

export interface SocialAppQuery {
  search?: string;
  provider?: string;
  ordering?: string;
  page?: string;
  page_size?: string;
}

const ORDERING: Record<string, string> = { name: 'name', '-name': 'name DESC', provider: 'provider', '-provider': 'provider DESC', id: 'id', '-id': 'id DESC' };

/** GET /api/auth/social-apps/ (public): §4's list, page_size 10 by default and at most 100. */
export async function listSocialApps(em: EntityManager, schema: string, query: SocialAppQuery): Promise<{ items: SocialAppListItem[]; total: number; page: number; page_size: number; total_pages: number }> {
  const errors: FieldErrors = {};
  const int = (v: string | undefined, field: string, fallback: number, max?: number) => {
    if (v === undefined || v === '') return fallback;
    if (!/^\d{1,6}$/.test(v) || Number(v) < 1 || (max !== undefined && Number(v) > max)) {
      errors[field] = [max ? `A whole number from 1 to ${max}.` : 'A whole number from 1.'];
      return fallback;
    }
    return Number(v);
  };
  const page = int(query.page, 'page', 1);
  const pageSize = int(query.page_size, 'page_size', 10, 100);
  const order = ORDERING[query.ordering ?? 'name'];
  if (!order) errors.ordering = [`One of ${Object.keys(ORDERING).join(', ')}.`];
  if (Object.keys(errors).length) throw validationError(errors);
  const where: string[] = ['true'];
  const params: unknown[] = [];
  if (query.provider) {
    where.push('provider = ?');
    params.push(query.provider);
  }
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    where.push('(name ILIKE ? OR provider ILIKE ? OR client_id ILIKE ? OR provider_id ILIKE ?)');
    params.push(like, like, like, like);
  }
  const q = quotedSchema(schema);
  const total = await countOf(em, `SELECT count(*) AS n FROM ${q}.social_apps WHERE ${where.join(' AND ')}`, params);
  const found = await rows<SocialAppRow>(
    em,
    `SELECT ${COLUMNS} FROM ${q}.social_apps WHERE ${where.join(' AND ')} ORDER BY ${order}, id LIMIT ? OFFSET ?`,
    [...params, pageSize, (page - 1) * pageSize],
  );
  const items = found.map((r) => {
    const { secret: _s, client_id: _c, key: _k, settings, ...rest } = view(r);
    return { ...rest, icon: typeof settings.icon === 'string' ? settings.icon : null, auto_redirect: settings.auto_redirect === true };
  });
  return { items, total, page, page_size: pageSize, total_pages: Math.max(1, Math.ceil(total / pageSize)) };
}

export async function createSocialApp(ctx: ServiceContext, keyring: SecretKeyring, outbound: OutboundGuard, raw: unknown): Promise<SocialAppView> {
  const schema = await siteSchemaFor(ctx, 'create', 'SocialApp');
  const { merged, secret } = checkInput(raw);
  await checkServerUrl(outbound, merged.settings);
  const uuid = randomUUID();
  const sealed = keyring.seal(secret!, socialSecretAad(schema, uuid));
  try {
    const row = (await firstRow<SocialAppRow>(
      ctx.em,
      `INSERT INTO ${quotedSchema(schema)}.social_apps (uuid, provider, provider_id, name, client_id, secret_ciphertext, secret_key_version, key, settings)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb) RETURNING ${COLUMNS}`,
      [uuid, merged.provider, merged.provider_id, merged.name, merged.client_id, sealed.ciphertext, sealed.key_version, merged.key, JSON.stringify(merged.settings)],
    ))!;
    return view(row, secret);
  } catch (err) {
    throw duplicate(err) ?? err;
  }
}

export async function getSocialApp(ctx: ServiceContext, id: string): Promise<SocialAppView> {
  const schema = await siteSchemaFor(ctx, 'read', 'SocialApp');
  return view(await findApp(ctx.em, schema, id));
}

/** PATCH (and PUT): omitted fields keep their values; the masked secret sent back keeps the secret. */
export async function updateSocialApp(ctx: ServiceContext, keyring: SecretKeyring, outbound: OutboundGuard, id: string, raw: unknown): Promise<SocialAppView> {
  const schema = await siteSchemaFor(ctx, 'update', 'SocialApp');
  const current = await findApp(ctx.em, schema, id);
  const { merged, secret } = checkInput(raw, current);
  await checkServerUrl(outbound, merged.settings, current);
  const sealed = secret === undefined ? { ciphertext: current.secret_ciphertext, key_version: current.secret_key_version } : keyring.seal(secret, socialSecretAad(schema, current.uuid));
  try {
    const row = (await firstRow<SocialAppRow>(
      ctx.em,
      `UPDATE ${quotedSchema(schema)}.social_apps SET provider = ?, provider_id = ?, name = ?, client_id = ?, secret_ciphertext = ?, secret_key_version = ?, key = ?,
              settings = ?::jsonb, updated_at = now() WHERE id = ? RETURNING ${COLUMNS}`,
      [merged.provider, merged.provider_id, merged.name, merged.client_id, sealed.ciphertext, sealed.key_version, merged.key, JSON.stringify(merged.settings), current.id],
    ))!;
    return view(row);
  } catch (err) {
    throw duplicate(err) ?? err;
  }
}

/** DELETE: refused (400 with `active_users`) while active users are connected through the app. */
export async function deleteSocialApp(ctx: ServiceContext, id: string): Promise<void> {
  const schema = await siteSchemaFor(ctx, 'delete', 'SocialApp');
  const current = await findApp(ctx.em, schema, id);
  const q = quotedSchema(schema);
  // One transaction under the app's row lock: a sign-in connecting a user meanwhile (its foreign
  // key locks the app's row) waits, then the count sees it or the app is gone.
  await ctx.em.transactional(async (tx) => {
    await rows(tx, `SELECT id FROM ${q}.social_apps WHERE id = ? FOR UPDATE`, [current.id]);
    const active = await countOf(
      tx,
      `SELECT count(DISTINCT a.user_uuid) AS n FROM ${q}.social_accounts a JOIN ${q}.users u ON u.uuid = a.user_uuid
        WHERE a.social_app_id = ? AND u.is_active AND NOT u.is_deleted`,
      [current.id],
    );
    if (active > 0) {
      throw new DomainError('BAD_REQUEST', `Cannot delete social app "${current.name}": ${active} active user${active === 1 ? ' is' : 's are'} connected through it.`, {
        extra: { success: false, active_users: active, suggestion: 'Disconnect those users (or deactivate them) first, or keep the app and change its credentials.' },
      });
    }
    // Accounts of deleted or inactive users go with the app (they could not sign in through it anyway).
    await rows(tx, `DELETE FROM ${q}.social_accounts WHERE social_app_id = ?`, [current.id]);
    await rows(tx, `DELETE FROM ${q}.social_apps WHERE id = ?`, [current.id]);
  });
}
