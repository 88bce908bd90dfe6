// Input and output schemas of a site's own users. Inputs are the platform user schemas
// (same rules for usernames, e-mails, passwords); the view adds the platform link.
import { Type, type Static } from '@sinclair/typebox';
import { readOnlyProps } from '../common/read-only.ts';
import { ProfileUpdate, UserUpdate, UserView } from '../users/user.schemas.ts';

export { ChangePassword, UserCreate as SiteUserCreate, UserListQuery as SiteUserListQuery, UserRef } from '../users/user.schemas.ts';

// Site users have no e-mail verification (an address grants nothing beyond signing in to the
// site), so no `pending_email`; a platform link instead.
const { pending_email: _pending, ...userFields } = UserView.properties;

export const SiteUserView = Type.Object(
  {
    ...userFields,
    platform_user_uuid: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
      description: 'Set for users linked to a platform account (organization owners and admins): they sign in with that account\'s password.',
    }),
  },
  { $id: 'SiteUser' },
);
export type SiteUserView = Static<typeof SiteUserView>;

const { pending_email: _p1, is_deleted: _d, ...updateFields } = UserUpdate.properties;
export const SiteUserUpdate = Type.Object(
  { ...updateFields, ...readOnlyProps(SiteUserView, ['is_deleted', 'platform_user_uuid']) },
  { additionalProperties: false },
);
export type SiteUserUpdate = Static<typeof SiteUserUpdate>;

const { pending_email: _p2, ...profileFields } = ProfileUpdate.properties;
export const SiteProfileUpdate = Type.Object({ ...profileFields, ...readOnlyProps(SiteUserView, ['platform_user_uuid']) }, { additionalProperties: false });
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
