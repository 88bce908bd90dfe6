// App settings: one row per app ("<schema>".app_settings), created with the app, never
// deleted. Decided on the app (App subject): reads by any signed-in user of the site, writes
// by the site's administrators.
// The icon is checked by its content (magic bytes; SVG as sanitised-by-refusal XML text)
// and stored under <dataDir>/icons/<schema>/<app id>.<ext>, written atomically.
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TObject } from '@sinclair/typebox';
import { dropReadOnly } from '../common/read-only.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { DomainError, fieldError, notFound } from '../errors.ts';
import { iso, firstRow } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { siteSchemaFor } from '../tenancy/site-access.ts';
import { notifyAppSettingsChanged } from './app-limits.ts';
import { activeApp, activeAppFor } from './lookup.ts';
import { checkDefaultWorker } from '../workers/worker.service.ts';
import { workerUrl } from '../workers/hostnames.ts';
import { MAX_ICON_BYTES, SETTINGS_DEFAULTS, SettingsPatch, SettingsPatchBody, SettingsPut, type SettingsDetail, type SettingsLight, type SettingsView } from './app-settings.schemas.ts';

export interface SettingsRow {
  id: number;
  display_name: string;
  icon_path: string | null;
  icon_content_type: string | null;
  primary_color: string;
  secondary_color: string;
  category: 'analytics' | 'integration' | 'storage';
  max_functions: number;
  max_datatables: number;
  rate_limit_per_hour: number;
  documentation_url: string;
  support_email: string;
  created_at: Date | string;
  updated_at: Date | string;
  default_frontend_worker: number | null;
  /** The default worker's host and kind (settingsOf joins them). */
  worker_host: string | null;
  worker_internal: boolean | null;
}

/** `baseUrl`: the absolute prefix of the site's API (`https://host` or `https://host/sites/<schema>`); '' for a relative URL. */
export const iconUrl = (row: Pick<SettingsRow, 'icon_path'>, slug: string, baseUrl: string): string | null =>
  row.icon_path ? `${baseUrl}/api/apps/${encodeURIComponent(slug)}/settings/icon/` : null;

export const settingsView = (r: SettingsRow, slug: string, baseUrl: string): SettingsView => ({
  display_name: r.display_name,
  icon_url: iconUrl(r, slug, baseUrl),
  primary_color: r.primary_color,
  secondary_color: r.secondary_color,
  category: r.category,
  max_functions: Number(r.max_functions),
  max_datatables: Number(r.max_datatables),
  rate_limit_per_hour: Number(r.rate_limit_per_hour),
  documentation_url: r.documentation_url,
  support_email: r.support_email,
  default_frontend_worker_url: r.worker_host ? workerUrl(r.worker_host, r.worker_internal!, baseUrl) : null,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
});

export const settingsDetail = (r: SettingsRow, slug: string, baseUrl: string): SettingsDetail => ({ id: Number(r.id), ...settingsView(r, slug, baseUrl) });

export const settingsLight = (r: Pick<SettingsRow, 'display_name' | 'category' | 'icon_path' | 'primary_color'>, slug: string, baseUrl: string): SettingsLight => ({
  display_name: r.display_name,
  category: r.category,
  icon_url: iconUrl(r, slug, baseUrl),
  primary_color: r.primary_color,
});

const COLUMNS = ['display_name', 'primary_color', 'secondary_color', 'category', 'max_functions', 'max_datatables', 'rate_limit_per_hour', 'documentation_url', 'support_email'] as const;

/** Validates a settings object (by default the `settings` of app creation: a new app has no worker, so default_frontend_worker is null there). */
export function checkSettings(raw: unknown, schema: TObject = SettingsPatch): SettingsPatch {
  const input = validate(schema, raw) as SettingsPatch;
  if (schema === SettingsPatch && input.default_frontend_worker !== undefined && input.default_frontend_worker !== null) {
    throw fieldError('default_frontend_worker', 'A new app has no frontend workers yet: create one for the app, then set it in the app settings.');
  }
  return input;
}

/** Inserts the settings row of a new app (inside the app's transaction). */
export async function insertSettings(tx: EntityManager, schema: string, appId: number, appName: string, input: SettingsPatch): Promise<void> {
  const values = { ...SETTINGS_DEFAULTS, display_name: appName, ...Object.fromEntries(COLUMNS.filter((c) => input[c] !== undefined).map((c) => [c, input[c]])) };
  await tx.execute(
    `INSERT INTO ${quotedSchema(schema)}.app_settings (app_id, ${COLUMNS.join(', ')}) VALUES (?, ${COLUMNS.map(() => '?').join(', ')})`,
    [appId, ...COLUMNS.map((c) => values[c])],
  );
  await notifyAppSettingsChanged(tx, schema); // a server may have cached "no such app" for this slug
}

export async function settingsOf(em: EntityManager, schema: string, appId: number): Promise<SettingsRow> {
  const q = quotedSchema(schema);
  return (await firstRow<SettingsRow>(
    em,
    `SELECT s.*, w.host AS worker_host, w.is_internal AS worker_internal FROM ${q}.app_settings s LEFT JOIN ${q}.frontend_workers w ON w.id = s.default_frontend_worker WHERE s.app_id = ?`,
    [appId],
  ))!;
}

// ---------------------------------------------------------------- icons

const ICON_TYPES: Record<string, string> = { png: 'image/png', jpg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', ico: 'image/x-icon', svg: 'image/svg+xml' };
const ALLOWED_NAMES = /\.(png|jpe?g|svg|ico|webp|gif)$/i;

/** The format of an image by its content, or undefined. */
export function sniffIcon(bytes: Buffer): keyof typeof ICON_TYPES | undefined {
  const starts = (sig: number[], at = 0) => sig.every((b, i) => bytes[at + i] === b);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'png';
  if (starts([0xff, 0xd8, 0xff])) return 'jpg';
  if (starts([0x47, 0x49, 0x46, 0x38]) && (bytes[4] === 0x37 || bytes[4] === 0x39) && bytes[5] === 0x61) return 'gif';
  if (starts([0x52, 0x49, 0x46, 0x46]) && starts([0x57, 0x45, 0x42, 0x50], 8)) return 'webp';
  if (starts([0x00, 0x00, 0x01, 0x00]) && bytes.length >= 6 && bytes.readUInt16LE(4) > 0) return 'ico';
  return looksLikeSvg(bytes) ? 'svg' : undefined;
}

function looksLikeSvg(bytes: Buffer): boolean {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return false;
  }
  const t = text.replace(/^\uFEFF/, '').trimStart();
  if (!t.startsWith('<svg') && !t.startsWith('<?xml')) return false;
  return /<svg[\s>]/i.test(t) && /<\/svg\s*>\s*$|\/>\s*$/i.test(t.trimEnd());
}

/** Active content an SVG must not carry (it is served from the site's origin). */
const SVG_DANGER = /<script|<foreignobject|<!entity|<!doctype|\son[a-z]+\s*=|javascript:|<iframe|<embed|<object/i;

export interface IconUpload {
  bytes: Buffer;
  filename: string;
}

/** Checks an upload; returns its extension and content type, or 400 naming `icon`. */
export function checkIcon(upload: IconUpload): { ext: string; contentType: string } {
  if (upload.bytes.length > MAX_ICON_BYTES) throw new DomainError('PAYLOAD_TOO_LARGE', 'The icon is larger than 5 MB.', { errors: { icon: ['Ensure the file is at most 5 MB.'] } });
  if (!upload.bytes.length) throw fieldError('icon', 'The submitted file is empty.');
  if (!ALLOWED_NAMES.test(upload.filename)) throw fieldError('icon', 'Allowed formats: png, jpg, jpeg, svg, ico, webp, gif.');
  const ext = sniffIcon(upload.bytes);
  if (!ext) throw fieldError('icon', 'The file content is not a png, jpg, svg, ico, webp or gif image.');
  if (ext === 'svg' && SVG_DANGER.test(upload.bytes.toString('utf8'))) throw fieldError('icon', 'SVG icons may not contain scripts, event handlers, entities or embedded content.');
  return { ext, contentType: ICON_TYPES[ext] };
}

/** Where settings keep their files: icons under <dataDir>/icons/<schema>/. */
export interface SettingsDeps {
  dataDir: string;
}

const iconRoot = (deps: SettingsDeps): string => path.join(deps.dataDir, 'icons');

async function storeIcon(root: string, schema: string, appId: number, bytes: Buffer, ext: string): Promise<string> {
  const dir = path.join(root, schema);
  await mkdir(dir, { recursive: true });
  const name = `${appId}.${ext}`;
  const tmp = path.join(dir, `.${name}.${randomUUID()}.tmp`);
  await writeFile(tmp, bytes, { mode: 0o640 });
  await rename(tmp, path.join(dir, name));
  await removeIcons(root, schema, appId, ext);
  return `${schema}/${name}`;
}

/** Removes the app's stored icon files (but the one of format `keep`). */
async function removeIcons(root: string, schema: string, appId: number, keep?: string): Promise<void> {
  for (const ext of Object.keys(ICON_TYPES)) if (ext !== keep) await rm(path.join(root, schema, `${appId}.${ext}`), { force: true });
}

/** GET /api/apps/{slug}/settings/ (no id). */
export async function getAppSettings(ctx: ServiceContext, slug: string, baseUrl = ''): Promise<SettingsView> {
  const schema = await siteSchemaFor(ctx, 'read', 'App');
  const app = await activeAppFor(ctx, schema, slug, 'read');
  return settingsView(await settingsOf(ctx.em, schema, app.id), app.slug, baseUrl);
}

/** PUT (`put`: display_name required) or PATCH; with `icon`, a new icon too. Nothing changes on any error. */
export async function updateAppSettings(
  ctx: ServiceContext,
  deps: SettingsDeps,
  slug: string,
  raw: unknown,
  options: { put?: boolean; icon?: IconUpload; baseUrl?: string } = {},
): Promise<SettingsView> {
  const schema = await siteSchemaFor(ctx, 'update', 'App');
  const app = await activeAppFor(ctx, schema, slug, 'update');
  const body = options.put ? SettingsPut : SettingsPatchBody;
  const input = dropReadOnly(body, checkSettings(raw ?? {}, body), settingsView(await settingsOf(ctx.em, schema, app.id), app.slug, options.baseUrl ?? ''));
  const icon = options.icon ? checkIcon(options.icon) : undefined;
  const sets: string[] = [];
  const params: unknown[] = [];
  if (input.default_frontend_worker !== undefined) {
    sets.push('default_frontend_worker = ?');
    params.push(await checkDefaultWorker(ctx.em, schema, app.id, input.default_frontend_worker));
  }
  for (const c of COLUMNS) {
    if (input[c] === undefined) continue;
    sets.push(`${c} = ?`);
    params.push(input[c]);
  }
  if (icon) {
    const stored = await storeIcon(iconRoot(deps), schema, app.id, options.icon!.bytes, icon.ext);
    sets.push('icon_path = ?', 'icon_content_type = ?');
    params.push(stored, icon.contentType);
  } else if (input.icon === null) {
    await removeIcons(iconRoot(deps), schema, app.id);
    sets.push('icon_path = NULL', 'icon_content_type = NULL');
  }
  await ctx.em.execute(`UPDATE ${quotedSchema(schema)}.app_settings SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE app_id = ?`, [...params, app.id] as never[]);
  if (input.rate_limit_per_hour !== undefined) await notifyAppSettingsChanged(ctx.em, schema);
  return settingsView(await settingsOf(ctx.em, schema, app.id), app.slug, options.baseUrl ?? '');
}

/** The icon of an active app of the site (public within the site: no actor): its bytes and content type, or 404. */
export async function appIcon(em: EntityManager, deps: SettingsDeps, schema: string, slug: string): Promise<{ bytes: Buffer; contentType: string; ext: string }> {
  const app = await activeApp(em, schema, slug);
  const row = await settingsOf(em, schema, app.id);
  const missing = notFound({ message: 'This app has no icon.' });
  if (!row.icon_path || !row.icon_content_type) throw missing;
  const root = iconRoot(deps);
  const file = path.resolve(root, row.icon_path);
  if (!file.startsWith(root + path.sep)) throw missing;
  try {
    return { bytes: await readFile(file), contentType: row.icon_content_type, ext: path.extname(file).slice(1) };
  } catch {
    throw missing;
  }
}

/** The app settings that cap how many of a kind of resource an app has (Part 2 §1), with the table counted and the noun of the message. */
const COUNT_LIMITS = {
  max_datatables: { table: 'data_tables', noun: 'data tables' },
  max_functions: { table: 'functions', noun: 'functions' },
} as const;

/** 400 (non_field_errors) when the app has as many resources as its setting `setting` allows already (a null setting: no limit). */
export async function checkAppCount(em: EntityManager, schema: string, appId: number, setting: keyof typeof COUNT_LIMITS): Promise<void> {
  const q = quotedSchema(schema);
  const { table, noun } = COUNT_LIMITS[setting];
  const row = await firstRow<{ max: number | null; n: string | number }>(
    em,
    `SELECT (SELECT ${setting} FROM ${q}.app_settings WHERE app_id = ?) AS max, (SELECT count(*) FROM ${q}.${table} WHERE app_id = ?) AS n`,
    [appId, appId],
  );
  if (row?.max !== null && row?.max !== undefined && Number(row.n) >= row.max) {
    throw fieldError('non_field_errors', `The app has reached its limit of ${row.max} ${noun} (settings: ${setting}).`);
  }
}
