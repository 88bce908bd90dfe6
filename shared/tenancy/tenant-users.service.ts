// A site's own users ("<schema>".users): administration by the site's superusers and staff,
// the signed-in user's profile and password, and public profiles. Decided on the SiteUser
// subject (public profiles: on the Tenant, what every user of the site sees) with the
// platform's rules (auth/actor.ts): staff cannot touch superusers nor grant the admin flags.
// Parameterised SQL on the schema of ctx.tenant (validated, quoted); DELETE is soft.
import type { EntityManager } from '@mikro-orm/postgresql';
import { checkPasswordStrength, hashPassword, verifyPassword } from '../auth/passwords.ts';
import { boolFilter, likeEscape } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { insertWithUniqueSlug, isUuid, slugify, uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { firstRow, rows } from '../db/sql.ts';
import { actorUuid, ownUuid, type ServiceContext } from '../context.ts';
import type { EventUser, UserEvents } from '../functions/events.service.ts';
import { DomainError, fieldError, notFound, validationError } from '../errors.ts';
import { toUserView, type UserRow } from '../users/user.queries.ts';
import { quotedSchema } from './schema.ts';
import { authorizeSiteSubject, siteSchemaFor, tenantSchema } from './site-access.ts';
import { dropReadOnly, sameValue, withoutUnchanged } from '../common/read-only.ts';
import {
  ATTRIBUTE_NAME_PATTERN, ChangePassword, MAX_ATTRIBUTES, RESERVED_ATTRIBUTES, SiteProfileUpdate, SiteUserCreate, SiteUserListQuery, SiteUserUpdate,
  type PublicProfile, type SiteUserView,
} from './tenant-users.schemas.ts';

const COLUMNS = 'uuid, username, email, first_name, last_name, is_active, is_deleted, is_staff, is_superuser, date_joined, modified, last_login, platform_user_uuid, attributes';
type Row = Required<UserRow> & { platform_user_uuid: string | null; attributes: Record<string, unknown> | null; password?: string | null };

function view(row: Row): SiteUserView {
  const { pending_email: _none, ...user } = toUserView(row);
  return { ...user, attributes: row.attributes ?? {}, platform_user_uuid: row.platform_user_uuid ?? null };
}

const isScalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);

/** The rules of `attributes` (tenant-users.schemas.ts) the schema does not say: 400 naming what is wrong. */
function checkAttributes(attributes: Record<string, unknown>): void {
  const errors: string[] = [];
  const names = Object.keys(attributes);
  if (names.length > MAX_ATTRIBUTES) errors.push(`Ensure there are no more than ${MAX_ATTRIBUTES} attributes.`);
  for (const name of names) {
    const value = attributes[name];
    if (!ATTRIBUTE_NAME_PATTERN.test(name)) errors.push(`"${name}" is not a valid attribute name: a letter or _, then letters, digits or _ (at most 64 characters).`);
    else if (RESERVED_ATTRIBUTES.includes(name)) errors.push(`"${name}" is reserved: the platform sets it.`);
    else if (!(isScalar(value) || (Array.isArray(value) && value.every(isScalar)))) errors.push(`The value of "${name}" must be a string, number, boolean, null, or an array of those.`);
  }
  if (errors.length) throw validationError({ attributes: errors });
}

export const LINKED_PASSWORD_MESSAGE =
  'This account signs in with its platform account: change the password on the platform (POST /api/profile/change-password/ on the platform host).';

async function one(em: EntityManager, sql: string, params: unknown[]): Promise<Row | undefined> {
  return (await em.getConnection().execute(sql, params, 'get')) as Row | undefined;
}

/** A site user by username (case-insensitive) or UUID; 404 when absent. */
async function findRow(em: EntityManager, schema: string, ref: string, options: { withPassword?: boolean; activeOnly?: boolean } = {}): Promise<Row> {
  const where = isUuid(ref) ? 'uuid = ?' : 'lower(username) = ?';
  const cols = options.withPassword ? `${COLUMNS}, password` : COLUMNS;
  const row = await one(em, `SELECT ${cols} FROM ${quotedSchema(schema)}.users WHERE ${where}${options.activeOnly ? ' AND NOT is_deleted' : ''}`, [ref.toLowerCase()]);
  if (!row) throw notFound('User');
  return row;
}

const ORDERING: Record<string, string> = {
  username: 'username ASC',
  '-username': 'username DESC',
  email: 'email ASC',
  '-email': 'email DESC',
  date_joined: 'date_joined ASC',
  '-date_joined': 'date_joined DESC',
  last_login: 'last_login ASC NULLS FIRST',
  '-last_login': 'last_login DESC NULLS LAST',
};

export async function listSiteUsers(ctx: ServiceContext, rawQuery: unknown): Promise<Page<SiteUserView>> {
  const schema = await siteSchemaFor(ctx, 'read', 'SiteUser');
  const query = validate(SiteUserListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const where: string[] = ['true'];
  const params: unknown[] = [];
  const isActive = boolFilter(query.is_active, undefined);
  const isDeleted = boolFilter(query.is_deleted, false);
  for (const [column, value] of [['is_active', isActive], ['is_deleted', isDeleted]] as const) {
    if (value === undefined) continue;
    where.push(`${column} = ?`);
    params.push(value);
  }
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    where.push('(username ILIKE ? OR email ILIKE ? OR first_name ILIKE ? OR last_name ILIKE ?)');
    params.push(like, like, like, like);
  }
  const from = `FROM ${quotedSchema(schema)}.users WHERE ${where.join(' AND ')}`;
  const conn = ctx.em.getConnection();
  const count = Number(((await conn.execute(`SELECT count(*) AS n ${from}`, params, 'get')) as { n: string }).n);
  const page = resolvePage(pageReq, count);
  const order = ORDERING[query.ordering ?? 'date_joined'] ?? ORDERING.date_joined;
  const rows = (await conn.execute(`SELECT ${COLUMNS} ${from} ORDER BY ${order}, uuid ASC LIMIT ? OFFSET ?`, [...params, page.pageSize, pageOffset(page)])) as Row[];
  return { ...page, count, results: rows.map(view) };
}

function duplicateError(err: unknown): DomainError | undefined {
  const constraint = uniqueViolation(err);
  if (constraint === 'users_username_key') return fieldError('username', 'A user with that username already exists.');
  if (constraint === 'users_email_key') return fieldError('email', 'A user with that e-mail already exists.');
  return undefined;
}

/** The new user as the user-creation events carry it (functions/events.service.ts). */
export type NewSiteUser = Omit<EventUser, 'id'>;

/**
 * Every path that makes a user of a site comes through here (administrators' creation, social
 * sign-in), so the site's user-creation events cannot be skipped: PRE_USER_CREATE runs first
 * (its failure aborts with nothing saved), then the insert — with `username`, or a name made from
 * `base` (`base-2` … when taken, retried when a concurrent insert took it) — each attempt in a
 * transaction of its own (a savepoint inside the caller's), which also queues POST_USER_CREATE.
 * `events` absent: a caller outside the server and the CLI (a test's direct service call).
 */
export async function insertSiteUser<T extends { uuid: string }>(
  em: EntityManager,
  schema: string,
  name: { username?: string; base: string },
  user: NewSiteUser,
  insert: (tx: EntityManager, username: string) => Promise<T>,
  hooks: { events?: UserEvents; invokedBy: string | null },
): Promise<T> {
  await hooks.events?.beforeCreate(schema, { ...user, username: name.username ?? name.base }, hooks.invokedBy);
  const attempt = (username: string) =>
    em.transactional(async (tx) => {
      const row = await insert(tx as EntityManager, username);
      await hooks.events?.afterCreate(tx as EntityManager, schema, { ...user, id: row.uuid, username }, hooks.invokedBy);
      return row;
    });
  if (name.username) return attempt(name.username);
  const taken = async (b: string) => (await rows<{ username: string }>(em, `SELECT username FROM ${quotedSchema(schema)}.users WHERE username ILIKE ?`, [`${likeEscape(b)}%`])).map((r) => r.username);
  return insertWithUniqueSlug(name.base, 'users_username_key', taken, attempt);
}

export async function createSiteUser(ctx: ServiceContext, rawInput: unknown): Promise<SiteUserView> {
  const schema = await siteSchemaFor(ctx, 'create', 'SiteUser');
  const input = validate(SiteUserCreate, rawInput);
  const created = { schema, is_superuser: input.is_superuser ?? false };
  await authorizeSiteSubject(ctx, 'create', 'SiteUser', created);
  if (input.is_superuser !== undefined) await authorizeSiteSubject(ctx, 'create', 'SiteUser', { schema, is_superuser: input.is_superuser }, 'is_superuser');
  if (input.is_staff !== undefined) await authorizeSiteSubject(ctx, 'create', 'SiteUser', created, 'is_staff');
  const email = input.email?.trim() ?? '';
  checkPasswordStrength(input.password, 'password', { username: input.username, email });
  const base = input.username ? '' : slugify(email.split('@')[0] || `${input.first_name ?? ''} ${input.last_name ?? ''}`, 140);
  if (!input.username && !base) throw fieldError('username', 'This field is required when no e-mail or name is given.');
  const password = await hashPassword(input.password);
  const user: NewSiteUser = {
    username: input.username ?? base,
    email,
    first_name: input.first_name ?? '',
    last_name: input.last_name ?? '',
    is_active: input.is_active ?? true,
    is_staff: input.is_staff ?? false,
    is_superuser: input.is_superuser ?? false,
  };
  const insert = async (em: EntityManager, username: string) =>
    (await firstRow<Row>(
      em,
      `INSERT INTO ${quotedSchema(schema)}.users (uuid, username, email, email_verified, password, first_name, last_name, is_active, is_staff, is_superuser)
       VALUES (gen_random_uuid(), ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
      [username, email, email !== '', password, user.first_name, user.last_name, user.is_active, user.is_staff, user.is_superuser],
    ))!;
  try {
    return view(await insertSiteUser(ctx.em, schema, { username: input.username, base }, user, insert, { events: ctx.events, invokedBy: actorUuid(ctx) }));
  } catch (err) {
    throw duplicateError(err) ?? err;
  }
}

export async function getSiteUser(ctx: ServiceContext, ref: string): Promise<SiteUserView> {
  const schema = await siteSchemaFor(ctx, 'read', 'SiteUser');
  const user = await findRow(ctx.em, schema, ref);
  await authorizeSiteSubject(ctx, 'read', 'SiteUser', { schema, uuid: user.uuid, is_superuser: user.is_superuser });
  return view(user);
}

const UPDATABLE = ['username', 'email', 'first_name', 'last_name', 'is_active', 'is_staff', 'is_superuser'] as const;

/** Writes the given fields (and a new password hash); bumps the token generation when asked. */
async function writeUser(ctx: ServiceContext, schema: string, user: Row, input: SiteUserUpdate, revoke: boolean): Promise<SiteUserView> {
  const sets: string[] = ['modified = now()'];
  const params: unknown[] = [];
  for (const field of UPDATABLE) {
    if (input[field] === undefined) continue;
    sets.push(`${field} = ?`);
    params.push(field === 'email' ? (input.email as string).trim() : input[field]);
  }
  if (input.email !== undefined && input.email.trim() !== user.email) {
    // An address an administrator sets is vouched for; one users type into their own profile is
    // not, until a provider verifies it (social login auto-connects only to vouched addresses).
    sets.push('email_verified = ?');
    params.push(ctx.actor.kind === 'system' || ctx.actor.uuid !== user.uuid);
  }
  if (input.attributes !== undefined) {
    checkAttributes(input.attributes);
    sets.push('attributes = ?::jsonb');
    params.push(JSON.stringify(input.attributes));
  }
  if (input.password !== undefined) {
    checkPasswordStrength(input.password, 'password', { username: input.username ?? user.username, email: input.email ?? user.email });
    sets.push('password = ?');
    params.push(await hashPassword(input.password));
  }
  if (revoke) sets.push('token_generation = token_generation + 1');
  try {
    return view((await one(ctx.em, `UPDATE ${quotedSchema(schema)}.users SET ${sets.join(', ')} WHERE uuid = ? RETURNING ${COLUMNS}`, [...params, user.uuid]))!);
  } catch (err) {
    throw duplicateError(err) ?? err;
  }
}

/** PUT: a body sent back from GET works (read-only and unchanged fields are ignored); own password needs the old one. */
export async function updateSiteUser(ctx: ServiceContext, ref: string, rawInput: unknown): Promise<SiteUserView> {
  const schema = await siteSchemaFor(ctx, 'update', 'SiteUser');
  const input = validate(SiteUserUpdate, rawInput);
  const user = await findRow(ctx.em, schema, ref, { withPassword: true });
  withoutUnchanged(dropReadOnly(SiteUserUpdate, input, view(user)), view(user), ['password', 'old_password']);
  const current = { schema, uuid: user.uuid, is_superuser: user.is_superuser };
  await authorizeSiteSubject(ctx, 'update', 'SiteUser', current);
  for (const field of Object.keys(input)) if (field !== 'old_password') await authorizeSiteSubject(ctx, 'update', 'SiteUser', current, field);
  if (input.password !== undefined && user.platform_user_uuid) throw fieldError('password', LINKED_PASSWORD_MESSAGE);
  if (input.old_password !== undefined && input.password === undefined) throw fieldError('old_password', 'Send it with `password`, the new one.');
  const resetsOthers = ctx.actor.kind === 'system' || (ctx.actor.is_superuser && ctx.actor.uuid !== user.uuid);
  if (input.password !== undefined && !resetsOthers) {
    if (input.old_password === undefined) throw fieldError('old_password', 'Your current password is required to set a new one.');
    if (!(await verifyPassword(user.password ?? undefined, input.old_password))) throw fieldError('old_password', 'Your old password was entered incorrectly.');
  }
  return writeUser(ctx, schema, user, input, input.password !== undefined || input.is_active === false);
}

/** Soft delete: the user can no longer sign in or refresh; history and references stay. */
export async function deleteSiteUser(ctx: ServiceContext, ref: string): Promise<void> {
  const schema = await siteSchemaFor(ctx, 'delete', 'SiteUser');
  const user = await findRow(ctx.em, schema, ref);
  await authorizeSiteSubject(ctx, 'delete', 'SiteUser', { schema, uuid: user.uuid, is_superuser: user.is_superuser });
  if (ctx.actor.kind === 'user' && ctx.actor.uuid === user.uuid) throw new DomainError('BUSINESS_LOGIC_ERROR', 'You cannot delete your own account.');
  if (user.is_deleted) return;
  await ctx.em
    .getConnection()
    .execute(`UPDATE ${quotedSchema(schema)}.users SET is_deleted = true, is_active = false, token_generation = token_generation + 1, modified = now() WHERE uuid = ?`, [user.uuid]);
}

/**
 * The own-profile routes: the schema, if the caller may `action` their own row of this site's
 * users (a user of another site or of the platform: 403). The system actor passes here and is
 * told afterwards that it has no profile.
 */
async function ownProfileSchema(ctx: ServiceContext, action: 'read' | 'update', field?: string): Promise<string> {
  const schema = tenantSchema(ctx);
  await authorizeSiteSubject(ctx, action, 'SiteUser', { schema, ...(ctx.actor.kind === 'user' ? { uuid: ctx.actor.uuid } : {}) }, field);
  return schema;
}

export async function getSiteProfile(ctx: ServiceContext): Promise<SiteUserView> {
  const schema = await ownProfileSchema(ctx, 'read');
  return view(await findRow(ctx.em, schema, ownUuid(ctx)));
}

export async function updateSiteProfile(ctx: ServiceContext, rawInput: unknown): Promise<SiteUserView> {
  const schema = await ownProfileSchema(ctx, 'update');
  const input = validate(SiteProfileUpdate, rawInput);
  const user = await findRow(ctx.em, schema, ownUuid(ctx));
  const changes = dropReadOnly(SiteProfileUpdate, input, view(user));
  if (changes.attributes !== undefined && sameValue(changes.attributes, user.attributes ?? {})) delete changes.attributes; // sent back unchanged
  const self = { schema, uuid: user.uuid, is_superuser: user.is_superuser };
  for (const field of Object.keys(changes)) await authorizeSiteSubject(ctx, 'update', 'SiteUser', self, field);
  return writeUser(ctx, schema, user, changes, false);
}

/** Own-password users only; a linked user's password is the platform account's. Revokes every earlier token. */
export async function changeSitePassword(ctx: ServiceContext, rawInput: unknown): Promise<void> {
  const schema = await ownProfileSchema(ctx, 'update', 'password');
  const input = validate(ChangePassword, rawInput);
  const user = await findRow(ctx.em, schema, ownUuid(ctx), { withPassword: true });
  if (user.platform_user_uuid) throw new DomainError('BAD_REQUEST', LINKED_PASSWORD_MESSAGE);
  if (!(await verifyPassword(user.password ?? undefined, input.old_password))) {
    throw fieldError('old_password', 'Your old password was entered incorrectly.');
  }
  if (input.old_password === input.new_password) throw fieldError('new_password', 'The new password must differ from the old one.');
  checkPasswordStrength(input.new_password, 'new_password', { username: user.username, email: user.email });
  await writeUser(ctx, schema, user, { password: input.new_password }, true);
}

/** GET /api/users/{user}/profile/: public fields of a (not deleted) user of the same site. */
export async function getPublicProfile(ctx: ServiceContext, ref: string): Promise<PublicProfile> {
  const schema = await siteSchemaFor(ctx, 'read', 'Tenant');
  const user = await findRow(ctx.em, schema, ref, { activeOnly: true });
  return { uuid: user.uuid, username: user.username, first_name: user.first_name, last_name: user.last_name };
}
