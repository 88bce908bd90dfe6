// Platform users: list, create, get, update, soft delete; the current user's profile.
import { randomBytes } from 'node:crypto';
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { accessibleWhere, allows, authorize } from '../auth/actor.ts';
import { checkPasswordStrength, hashPassword, verifyPassword } from '../auth/passwords.ts';
import { boolFilter, likeEscape } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { dropReadOnly, withoutUnchanged } from '../common/read-only.ts';
import { isUuid, nextSlug, slugify, uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { ownUuid, type ServiceContext } from '../context.ts';
import { DomainError, fieldError, notFound, permissionDenied } from '../errors.ts';
import type { MailLinks } from '../mail/mailer.ts';
import { emailInUse, emailTaken, requestEmailChange } from './email-change.ts';
import { User, type UserEntity } from './user.entity.ts';
import { toUserView, USER_COLUMNS, usernameIs, type UserRow } from './user.queries.ts';
import { ChangePassword, ProfileUpdate, UserCreate, UserListQuery, UserUpdate, type UserView } from './user.schemas.ts';

/** A user by username (case-insensitive) or UUID; 404 when absent. */
export async function findUserByRef(em: EntityManager, ref: string, options: { withPassword?: boolean } = {}): Promise<UserEntity> {
  const where = (isUuid(ref) ? { uuid: ref.toLowerCase() } : usernameIs(ref)) as FilterQuery<UserEntity>;
  const user = await em.findOne(User, where, options.withPassword ? { populate: ['password'] } : {});
  if (!user) throw notFound('User');
  return user;
}

const ORDERING: Record<string, Record<string, 'asc' | 'desc'>> = {
  username: { username: 'asc' },
  '-username': { username: 'desc' },
  email: { email: 'asc' },
  '-email': { email: 'desc' },
  date_joined: { date_joined: 'asc' },
  '-date_joined': { date_joined: 'desc' },
  last_login: { last_login: 'asc' },
  '-last_login': { last_login: 'desc' },
};

export async function listUsers(ctx: ServiceContext, rawQuery: unknown): Promise<Page<UserView>> {
  const query = validate(UserListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const visible = accessibleWhere(ctx.ability, 'read', 'User');
  if (visible === null) throw permissionDenied();
  const and: FilterQuery<UserEntity>[] = [visible as FilterQuery<UserEntity>];
  const isActive = boolFilter(query.is_active, undefined);
  const isDeleted = boolFilter(query.is_deleted, false);
  if (isActive !== undefined) and.push({ is_active: isActive });
  if (isDeleted !== undefined) and.push({ is_deleted: isDeleted });
  if (query.organization_slug) {
    // Members of that organization (by slug or UUID); the caller's own visibility still applies.
    const members = await ctx.em.execute(
      `SELECT m.user_uuid FROM public.organization_members m JOIN public.organizations o ON o.uuid = m.organization_uuid
        WHERE o.slug = ? OR o.uuid::text = ?`,
      [query.organization_slug.toLowerCase(), query.organization_slug.toLowerCase()],
    );
    and.push({ uuid: { $in: members.map((r) => r.user_uuid as string) } });
  }
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    and.push({ $or: [{ username: { $ilike: like } }, { email: { $ilike: like } }, { first_name: { $ilike: like } }, { last_name: { $ilike: like } }] });
  }
  const where = { $and: and } as FilterQuery<UserEntity>;
  const orderBy = { ...(ORDERING[query.ordering ?? 'date_joined'] ?? ORDERING.date_joined), uuid: 'asc' as const };
  // Plain rows, no entities: a page of 100 users hydrated as entities costs ~5x more.
  const count = Number((await ctx.em.createQueryBuilder(User).count().where(where as never).execute('get', false)).count);
  const page = resolvePage(pageReq, count);
  const rows = (await ctx.em
    .createQueryBuilder(User)
    .select([...USER_COLUMNS, 'pending_email'])
    .where(where as never)
    .orderBy(orderBy)
    .limit(page.pageSize)
    .offset(pageOffset(page))
    .execute('all', false)) as unknown as UserRow[];
  return { ...page, count, results: rows.map(toUserView) };
}

async function usernameTaken(em: EntityManager, username: string, exceptUuid?: string): Promise<boolean> {
  const other = await em.findOne(User, usernameIs(username) as FilterQuery<UserEntity>, { fields: ['uuid'] });
  return !!other && other.uuid !== exceptUuid;
}

/** Maps a unique-index violation of the users table to the field it concerns. */
function duplicateError(err: unknown): DomainError | undefined {
  const constraint = uniqueViolation(err);
  if (constraint === 'users_username_key') return fieldError('username', 'A user with that username already exists.');
  if (constraint === 'users_email_key') return emailTaken();
  return undefined;
}

const RETURNING = [...USER_COLUMNS, 'pending_email'].map((c) => `"${c}"`).join(', ');

interface NewUser {
  username?: string;
  email: string;
  password: string;
  first_name: string;
  last_name: string;
  is_active: boolean;
  is_staff: boolean;
  is_superuser: boolean;
}

/**
 * Inserts the user (password already hashed). Without a username, one is generated from the
 * e-mail or the name (`-2`, `-3` … past those taken). ON CONFLICT DO NOTHING instead of a
 * failing INSERT, so this also runs inside a caller's transaction (invitation acceptance): a
 * username taken meanwhile is retried with the next candidate, never an aborted transaction.
 */
async function insertUser(em: EntityManager, user: NewUser): Promise<UserRow> {
  const base = user.username ?? slugify(user.email.split('@')[0] || `${user.first_name} ${user.last_name}`, 140);
  if (!base) throw fieldError('username', 'This field is required when no e-mail or name is given.');
  for (let attempt = 0; attempt < 8; attempt++) {
    let username = base;
    if (!user.username) {
      const taken = (await em.execute('SELECT username FROM public.users WHERE lower(username) LIKE ?', [`${likeEscape(base)}%`])) as { username: string }[];
      username = nextSlug(base, taken.map((u) => u.username));
    }
    const [row] = (await em.execute(
      `INSERT INTO public.users (uuid, username, email, password, first_name, last_name, is_active, is_staff, is_superuser)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING ${RETURNING}`,
      [crypto.randomUUID(), username, user.email, user.password, user.first_name, user.last_name, user.is_active, user.is_staff, user.is_superuser],
    )) as UserRow[];
    if (row) return row;
    if (await emailInUse(em, user.email)) throw emailTaken();
    if (user.username) throw fieldError('username', 'A user with that username already exists.');
  }
  throw new DomainError('CONFLICT', 'Could not find a free username; try again or give one.');
}

/**
 * The one way a platform user is created (the users API, the CLI, invitation acceptance,
 * bootstrap): validation, permission, password rules, uniqueness.
 */
export async function createUser(ctx: ServiceContext, rawInput: unknown): Promise<UserView> {
  const input = validate(UserCreate, rawInput);
  authorize(ctx.ability, 'create', 'User', { is_superuser: input.is_superuser ?? false });
  if (input.is_superuser !== undefined) authorize(ctx.ability, 'create', 'User', { is_superuser: input.is_superuser }, 'is_superuser');
  if (input.is_staff !== undefined) authorize(ctx.ability, 'create', 'User', { is_superuser: input.is_superuser ?? false }, 'is_staff');
  const email = input.email?.trim() ?? '';
  checkPasswordStrength(input.password, 'password', { username: input.username, email });
  if (await emailInUse(ctx.em, email)) throw emailTaken();
  if (input.username && (await usernameTaken(ctx.em, input.username))) throw fieldError('username', 'A user with that username already exists.');
  const row = await insertUser(ctx.em, {
    username: input.username,
    email,
    password: await hashPassword(input.password),
    first_name: input.first_name ?? '',
    last_name: input.last_name ?? '',
    is_active: input.is_active ?? true,
    is_staff: input.is_staff ?? false,
    is_superuser: input.is_superuser ?? false,
  });
  return toUserView(row);
}

export async function getUser(ctx: ServiceContext, ref: string): Promise<UserView> {
  const user = await findUserByRef(ctx.em, ref);
  if (!allows(ctx.ability, 'read', 'User', user)) throw notFound('User');
  return toUserView(user);
}

/** Whether the caller may set `user`'s password without the old one: a superuser (or the system actor) acting on someone else. */
function resetsOthersPassword(ctx: ServiceContext, user: UserEntity): boolean {
  return ctx.actor.kind === 'system' || (ctx.actor.is_superuser && ctx.actor.uuid !== user.uuid);
}

const isSelf = (ctx: ServiceContext, user: UserEntity): boolean => ctx.actor.kind === 'user' && ctx.actor.uuid === user.uuid;

async function applyUpdate(ctx: ServiceContext, user: UserEntity, input: UserUpdate, mail?: MailLinks): Promise<UserView> {
  withoutUnchanged(input, toUserView(user), ['password', 'old_password']);
  const { password, old_password: oldPassword, is_deleted: isDeleted, ...fields } = input;
  const current = { uuid: user.uuid, is_superuser: user.is_superuser };
  authorize(ctx.ability, 'update', 'User', current);
  for (const field of Object.keys(input)) if (field !== 'old_password') authorize(ctx.ability, 'update', 'User', current, field);
  if (oldPassword !== undefined && password === undefined) throw fieldError('old_password', 'Send it with `password`, the new one.');
  if (password !== undefined && !resetsOthersPassword(ctx, user)) {
    if (oldPassword === undefined) {
      throw fieldError('old_password', isSelf(ctx, user) ? 'Your current password is required to set a new one.' : 'Only a superuser sets another user\'s password without its current one.');
    }
    const [stored] = (await ctx.em.execute('SELECT password FROM public.users WHERE uuid = ?', [user.uuid])) as { password: string }[];
    if (!(await verifyPassword(stored?.password, oldPassword))) throw fieldError('old_password', 'Your old password was entered incorrectly.');
  }
  if (isDeleted === true) throw fieldError('is_deleted', 'Delete a user with DELETE.');
  if (fields.username !== undefined && (await usernameTaken(ctx.em, fields.username, user.uuid))) {
    throw fieldError('username', 'A user with that username already exists.');
  }
  const email = fields.email?.trim();
  delete fields.email;
  let pendingEmail: string | undefined;
  if (email !== undefined && email.toLowerCase() !== user.email.toLowerCase()) {
    // A new address of your own waits for its confirmation link; an operator's change applies at once.
    if (email && isSelf(ctx, user)) pendingEmail = email;
    else if (await emailInUse(ctx.em, email, user.uuid)) throw emailTaken();
    else user.email = email;
  }
  if (pendingEmail !== undefined && !mail) throw new DomainError('INTERNAL_ERROR', 'E-mail changes need a mailer.');
  ctx.em.assign(user, fields);
  if (password !== undefined) {
    checkPasswordStrength(password, 'password', { username: user.username, email: user.email });
    user.password = await hashPassword(password);
    user.token_generation += 1;
  }
  if (isDeleted === false) {
    // Restore (superusers only: the field check above): active again unless the body says otherwise.
    user.is_deleted = false;
    if (fields.is_active === undefined) user.is_active = true;
  }
  if (fields.is_active === false) user.token_generation += 1;
  // The changes, the pending address and its mail: all or nothing (a mail failure changes nothing).
  await ctx.em.begin();
  try {
    await ctx.em.flush();
    if (pendingEmail !== undefined) await requestEmailChange(ctx.em, user, pendingEmail, mail!);
    await ctx.em.commit();
  } catch (err) {
    await ctx.em.rollback();
    throw duplicateError(err) ?? err;
  }
  if (pendingEmail !== undefined) await ctx.em.refresh(user);
  return toUserView(user);
}

/** PUT /api/cloud/users/{user}/: a body sent back from GET works (read-only and unchanged fields are ignored). */
export async function updateUser(ctx: ServiceContext, ref: string, rawInput: unknown, mail?: MailLinks): Promise<UserView> {
  const input = validate(UserUpdate, rawInput);
  const user = await findUserByRef(ctx.em, ref);
  if (!allows(ctx.ability, 'read', 'User', user)) throw notFound('User');
  return applyUpdate(ctx, user, dropReadOnly(UserUpdate, input, toUserView(user)), mail);
}

/** Soft delete: the account stays (history, references) but can no longer log in or refresh. */
export async function deleteUser(ctx: ServiceContext, ref: string): Promise<void> {
  const user = await findUserByRef(ctx.em, ref);
  if (!allows(ctx.ability, 'read', 'User', user)) throw notFound('User');
  authorize(ctx.ability, 'delete', 'User', { uuid: user.uuid, is_superuser: user.is_superuser });
  if (ctx.actor.kind === 'user' && ctx.actor.uuid === user.uuid) {
    throw new DomainError('BUSINESS_LOGIC_ERROR', 'You cannot delete your own account.');
  }
  if (user.is_deleted) return;
  user.is_deleted = true;
  user.is_active = false;
  user.token_generation += 1;
  await ctx.em.flush();
}

export async function getProfile(ctx: ServiceContext): Promise<UserView> {
  // Authentication read the user's row for this request already: no second query.
  if (ctx.actor.kind === 'user' && ctx.actor.user) return ctx.actor.user;
  return toUserView(await findUserByRef(ctx.em, ownUuid(ctx)));
}

export async function updateProfile(ctx: ServiceContext, rawInput: unknown, mail?: MailLinks): Promise<UserView> {
  const input = validate(ProfileUpdate, rawInput);
  const user = await findUserByRef(ctx.em, ownUuid(ctx));
  return applyUpdate(ctx, user, dropReadOnly(ProfileUpdate, input, toUserView(user)), mail);
}

/** Changes the caller's password and revokes every token issued before (refresh tokens included). */
export async function changePassword(ctx: ServiceContext, rawInput: unknown): Promise<void> {
  const input = validate(ChangePassword, rawInput);
  const user = await findUserByRef(ctx.em, ownUuid(ctx), { withPassword: true });
  if (!(await verifyPassword(user.password, input.old_password))) {
    throw fieldError('old_password', 'Your old password was entered incorrectly.');
  }
  if (input.old_password === input.new_password) throw fieldError('new_password', 'The new password must differ from the old one.');
  checkPasswordStrength(input.new_password, 'new_password', { username: user.username, email: user.email });
  user.password = await hashPassword(input.new_password);
  user.token_generation += 1;
  await ctx.em.flush();
}

export interface BootstrapResult {
  created: boolean;
  username?: string;
  /** Only when the password was generated: shown once to the operator, never logged. */
  generatedPassword?: string;
}

/** Creates the first superuser when none exists (PLATFORM_ADMIN_* or a generated password). */
export async function bootstrapAdmin(
  ctx: ServiceContext,
  admin: { username?: string; password?: string; email?: string },
): Promise<BootstrapResult> {
  if (ctx.actor.kind !== 'system') throw permissionDenied();
  const existing = await ctx.em.count(User, { is_superuser: true, is_deleted: false });
  if (existing > 0) return { created: false };
  const username = admin.username ?? 'admin';
  const generatedPassword = admin.password ? undefined : randomBytes(18).toString('base64url');
  try {
    await createUser(ctx, {
      username,
      password: admin.password ?? generatedPassword,
      ...(admin.email ? { email: admin.email } : {}),
      is_staff: true,
      is_superuser: true,
    });
  } catch (err) {
    // Two processes bootstrapping at once: the other one won.
    if (err instanceof DomainError && err.code === 'VALIDATION_ERROR' && err.errors?.username) return { created: false };
    throw err;
  }
  return { created: true, username, generatedPassword };
}

