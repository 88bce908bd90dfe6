import { defineEntity, p } from '@mikro-orm/core';

/** A platform (control-plane) user. Lives in the `public` schema. */
export const User = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: {
    uuid: p.uuid().primary().onCreate(() => crypto.randomUUID()),
    username: p.string().length(150),
    email: p.string().length(254).default(''),
    /** A self-service e-mail change waiting for its confirmation (users/email-change.ts). */
    pending_email: p.string().length(254).default(''),
    first_name: p.string().length(150).default(''),
    last_name: p.string().length(150).default(''),
    password: p.string().length(255).hidden().lazy(),
    is_active: p.boolean().default(true),
    is_deleted: p.boolean().default(false),
    is_staff: p.boolean().default(false),
    is_superuser: p.boolean().default(false),
    /** Bumped on password change and deletion: tokens carrying an older generation are refused. */
    token_generation: p.integer().default(0).hidden(),
    date_joined: p.datetime().onCreate(() => new Date()),
    modified: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
    last_login: p.datetime().nullable(),
  },
});
export type UserEntity = InstanceType<typeof User.class>;

/** Refresh tokens that were blacklisted (logout). Kept in PostgreSQL so every process sees them. */
export const BlacklistedToken = defineEntity({
  name: 'BlacklistedToken',
  tableName: 'token_blacklist',
  properties: {
    jti: p.uuid().primary(),
    user_uuid: p.uuid(),
    expires_at: p.datetime(),
    blacklisted_at: p.datetime().onCreate(() => new Date()),
  },
});
