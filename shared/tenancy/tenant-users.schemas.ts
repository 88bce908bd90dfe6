// Input and output schemas of a site's own users. Inputs are the platform user schemas
// (same rules for usernames, e-mails, passwords); the view adds the platform link.
import { Type, type Static } from '@sinclair/typebox';
import { readOnlyProps } from '../common/read-only.ts';
import { ProfileUpdate, UserUpdate, UserView } from '../users/user.schemas.ts';

export { ChangePassword, UserCreate as SiteUserCreate, UserListQuery as SiteUserListQuery, UserRef } from '../users/user.schemas.ts';

// Site users have no e-mail verification (an address grants nothing beyond signing in to the
// site), so no `pending_email`; a platform link instead.
const { pending_email: _pending, ...userFields } = UserView.properties;

/**
 * A site user's own attributes, the `attr` of its policy principal (policies/principal.ts):
 * at most 64, named like identifiers, each a JSON scalar or an array of scalars (checked by
 * `attributeErrors`). `tenant_id` and `app_slug` are reserved: the platform sets them in every
 * principal. Written by the site's administrators only — a user who could set their own would
 * grant themselves whatever a policy conditions on them.
 */
export const MAX_ATTRIBUTES = 64;
export const ATTRIBUTE_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export const RESERVED_ATTRIBUTES: readonly string[] = ['tenant_id', 'app_slug'];
const Attributes = Type.Record(Type.String(), Type.Unknown(), {
  description: `The user's attributes for authorization policies (\`P.attr\`): at most ${MAX_ATTRIBUTES}; names of letters, digits and _ (not starting with a digit, at most 64 characters); values strings, numbers, booleans, null or arrays of those; \`tenant_id\` and \`app_slug\` are reserved. A new object replaces the whole set. Site administrators only.`,
});

export const SiteUserView = Type.Object(
  {
    ...userFields,
    attributes: Attributes,
    platform_user_uuid: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
      description: 'Set for users linked to a platform account (organization owners and admins): they sign in with that account\'s password.',
    }),
  },
  { $id: 'SiteUser' },
);
export type SiteUserView = Static<typeof SiteUserView>;

const { pending_email: _p1, is_deleted: _d, ...updateFields } = UserUpdate.properties;
export const SiteUserUpdate = Type.Object(
  { ...updateFields, attributes: Type.Optional(Attributes), ...readOnlyProps(SiteUserView, ['is_deleted', 'platform_user_uuid']) },
  { additionalProperties: false },
);
export type SiteUserUpdate = Static<typeof SiteUserUpdate>;

const { pending_email: _p2, ...profileFields } = ProfileUpdate.properties;
// `attributes` sent back unchanged is ignored; changed, it needs an administrator (403 otherwise).
export const SiteProfileUpdate = Type.Object(
  { ...profileFields, attributes: Type.Optional(Attributes), ...readOnlyProps(SiteUserView, ['platform_user_uuid']) },
  { additionalProperties: false },
);
export type SiteProfileUpdate = Static<typeof SiteProfileUpdate>;

/** What any signed-in user of the site sees of another (GET /api/users/{user}/profile/). */
export const PublicProfile = Type.Object(
  {
    uuid: Type.String({ format: 'uuid' }),
    username: Type.String(),
    first_name: Type.String(),
    last_name: Type.String(),
  },
  { $id: 'PublicProfile' },
);
export type PublicProfile = Static<typeof PublicProfile>;
