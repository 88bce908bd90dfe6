// Secret types of a site ("<schema>".secret_types): a name, a slug, a JSON Schema for values.
// Decided on the SecretType subject: the site's administrators and holders of the site's
// *_secret permissions (auth/actor.ts).
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { EntityManager } from '@mikro-orm/postgresql';
import { likeEscape } from '../common/filters.ts';
import { linearRegExp, patternProblem } from '../common/linear-regexp.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { insertWithUniqueSlug, isUuid, slugify, uniqueViolation } from '../common/slug.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { DomainError, fieldError, notFound } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import type { Action } from '../auth/actor.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { SecretTypeCreate, SecretTypeListQuery, SecretTypeUpdate, type SecretTypeView } from './secret-type.schemas.ts';
import { countOf, firstRow, iso, pgCode, rows } from '../db/sql.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

export interface SecretTypeRow {
  uuid: string;
  slug: string;
  name: string;
  description: string;
  json_schema: Record<string, unknown>;
  created: Date | string;
  modified: Date | string;
}

const COLUMNS = 'uuid, slug, name, description, json_schema, created, modified';

const view = (r: SecretTypeRow): SecretTypeView => ({
  uuid: r.uuid,
  slug: r.slug,
  name: r.name,
  description: r.description,
  json_schema: typeof r.json_schema === 'string' ? JSON.parse(r.json_schema) : r.json_schema,
  created: iso(r.created),
  modified: iso(r.modified),
});

/** Keywords whose values are data, not schemas: a `pattern` inside them is not a pattern. */
const DATA_KEYWORDS = new Set(['enum', 'const', 'default', 'examples']);

/**
 * The first `pattern` or `patternProperties` key of a schema that RE2 cannot run, described.
 * Checked up front: Ajv leaves out patterns whose checks cannot fail (`patternProperties: {p: {}}`).
 */
function unusablePattern(node: unknown): string | undefined {
  if (!node || typeof node !== 'object') return undefined;
  for (const [key, value] of Object.entries(node)) {
    if (DATA_KEYWORDS.has(key)) continue;
    const patterns = key === 'pattern' && typeof value === 'string' ? [value] : key === 'patternProperties' && value && typeof value === 'object' ? Object.keys(value) : [];
    for (const pattern of patterns) {
      const problem = patternProblem(pattern);
      if (problem) return `${key} ${JSON.stringify(pattern)} ${problem}`;
    }
    const inner = unusablePattern(value);
    if (inner) return inner;
  }
  return undefined;
}

/**
 * Compiles a user-supplied JSON Schema; 400 naming `field` when it is not one. A fresh Ajv
 * each time: user schemas must not accumulate in (or clash by `$id` inside) a shared instance.
 * Its patterns run on RE2 (linear time); lookaround and backreferences are refused here.
 */
export function compileJsonSchema(schema: unknown, field = 'json_schema'): ValidateFunction {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) throw fieldError(field, 'Must be a JSON Schema object.');
  if ('$async' in schema) throw fieldError(field, 'Asynchronous schemas ($async) are not supported.');
  const pattern = unusablePattern(schema);
  if (pattern) throw fieldError(field, `Not a valid JSON Schema: ${pattern}.`);
  const ajv = new Ajv({ allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false, strictRequired: false, validateFormats: true, code: { regExp: linearRegExp } });
  addFormats(ajv);
  try {
    return ajv.compile(schema);
  } catch (err) {
    throw fieldError(field, `Not a valid JSON Schema: ${(err as Error).message}`);
  }
}

/** Checks a secret value against its type's schema; 400 on `value` with Ajv's messages. */
export function checkValue(type: SecretTypeRow | undefined, value: unknown): void {
  if (!type) return;
  const fn = compileJsonSchema(view(type).json_schema);
  if (fn(value)) return;
  const messages = (fn.errors ?? []).map((e) => `${e.instancePath ? `${e.instancePath}: ` : ''}${e.message ?? 'is invalid'}`);
  throw new DomainError('VALIDATION_ERROR', `The value does not match the secret type "${type.slug}".`, { errors: { value: [...new Set(messages)] } });
}

/** A type by slug or UUID, or undefined. */
export async function findSecretType(em: EntityManager, schema: string, ref: string): Promise<SecretTypeRow | undefined> {
  const where = isUuid(ref) ? 'uuid = ?' : 'slug = ?';
  return firstRow<SecretTypeRow>(em, `SELECT ${COLUMNS} FROM ${quotedSchema(schema)}.secret_types WHERE ${where}`, [ref.toLowerCase()]);
}

/** The type `ref` (slug or UUID), if the actor may `action` it: 404 when absent, 403 when denied. */
async function typeFor(ctx: ServiceContext, schema: string, ref: string, action: Action): Promise<SecretTypeRow> {
  const type = await findSecretType(ctx.em, schema, ref);
  if (!type) throw notFound('Secret type');
  await authorizeSiteSubject(ctx, action, 'SecretType', { schema, slug: type.slug });
  return type;
}

export async function listSecretTypes(ctx: ServiceContext, rawQuery: unknown): Promise<Page<SecretTypeView>> {
  const schema = await siteSchemaFor(ctx, 'read', 'SecretType');
  const query = validate(SecretTypeListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const params: unknown[] = [];
  let where = 'true';
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    where = '(name ILIKE ? OR slug ILIKE ? OR description ILIKE ?)';
    params.push(like, like, like);
  }
  const from = `FROM ${quotedSchema(schema)}.secret_types WHERE ${where}`;
  const count = await countOf(ctx.em, `SELECT count(*) AS n ${from}`, params);
  const page = resolvePage(pageReq, count);
  const found = await rows<SecretTypeRow>(ctx.em, `SELECT ${COLUMNS} ${from} ORDER BY name, slug LIMIT ? OFFSET ?`, [...params, page.pageSize, pageOffset(page)]);
  return { ...page, count, results: found.map(view) };
}

export async function createSecretType(ctx: ServiceContext, rawInput: unknown): Promise<SecretTypeView> {
  const schema = await siteSchemaFor(ctx, 'create', 'SecretType');
  const input = validate(SecretTypeCreate, rawInput);
  const jsonSchema = input.json_schema ?? {};
  compileJsonSchema(jsonSchema);
  const q = quotedSchema(schema);
  const insert = async (slug: string) =>
    (await firstRow<SecretTypeRow>(
      ctx.em,
      `INSERT INTO ${q}.secret_types (uuid, slug, name, description, json_schema) VALUES (gen_random_uuid(), ?, ?, ?, ?::jsonb) RETURNING ${COLUMNS}`,
      [slug, input.name, input.description ?? '', JSON.stringify(jsonSchema)],
    ))!;
  try {
    if (input.slug) return view(await insert(input.slug));
    const base = slugify(input.name, 90);
    if (!base) throw fieldError('name', 'The name needs at least one letter or digit (the slug is made from it).');
    const taken = async (b: string) => (await rows<{ slug: string }>(ctx.em, `SELECT slug FROM ${q}.secret_types WHERE slug LIKE ?`, [`${likeEscape(b)}%`])).map((r) => r.slug);
    return view(await insertWithUniqueSlug(base, 'secret_types_slug_key', taken, insert));
  } catch (err) {
    if (uniqueViolation(err) === 'secret_types_slug_key') throw fieldError('slug', 'A secret type with this slug already exists.');
    throw err;
  }
}

export async function getSecretType(ctx: ServiceContext, ref: string): Promise<SecretTypeView> {
  const schema = await siteSchemaFor(ctx, 'read', 'SecretType');
  return view(await typeFor(ctx, schema, ref, 'read'));
}

export async function updateSecretType(ctx: ServiceContext, ref: string, rawInput: unknown): Promise<SecretTypeView> {
  const schema = await siteSchemaFor(ctx, 'update', 'SecretType');
  const input = validate(SecretTypeUpdate, rawInput);
  const type = await typeFor(ctx, schema, ref, 'update');
  dropReadOnly(SecretTypeUpdate, input, view(type));
  if (input.json_schema !== undefined) compileJsonSchema(input.json_schema);
  const updated = await firstRow<SecretTypeRow>(
    ctx.em,
    `UPDATE ${quotedSchema(schema)}.secret_types
        SET name = coalesce(?, name), description = coalesce(?, description), json_schema = coalesce(?::jsonb, json_schema), modified = now()
      WHERE uuid = ? RETURNING ${COLUMNS}`,
    [input.name ?? null, input.description ?? null, input.json_schema === undefined ? null : JSON.stringify(input.json_schema), type.uuid],
  );
  return view(updated!);
}

const IN_USE = (n: number) => `This secret type is used by ${n} secret${n === 1 ? '' : 's'}: delete them or change their type first.`;

/** Refused (400) while secrets use the type. */
export async function deleteSecretType(ctx: ServiceContext, ref: string): Promise<void> {
  const schema = await siteSchemaFor(ctx, 'delete', 'SecretType');
  const type = await typeFor(ctx, schema, ref, 'delete');
  const q = quotedSchema(schema);
  const used = await countOf(ctx.em, `SELECT count(*) AS n FROM ${q}.secrets WHERE secret_type_uuid = ?`, [type.uuid]);
  if (used) throw new DomainError('BAD_REQUEST', IN_USE(used));
  try {
    await ctx.em.execute(`DELETE FROM ${q}.secret_types WHERE uuid = ?`, [type.uuid]);
  } catch (err) {
    // A secret of this type created meanwhile: the foreign key (ON DELETE RESTRICT) refuses.
    if (pgCode(err) === '23503') throw new DomainError('BAD_REQUEST', IN_USE(1));
    throw err;
  }
}
