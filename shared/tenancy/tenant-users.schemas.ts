// Input and output schemas of a site's own users. Inputs are the platform user schemas
// (same rules for usernames, e-mails, passwords); the view adds the platform link.
import { Type, type Static } from '@sinclair/typebox';
import { UserView } from '../users/user.schemas.ts';

export { ChangePassword, ProfileUpdate, UserCreate as SiteUserCreate, UserListQuery as SiteUserListQuery, UserRef, UserUpdate as SiteUserUpdate } from '../users/user.schemas.ts';

export const SiteUserView = Type.Object(
  {
    ...UserView.properties,
    platform_user_uuid: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
      description: 'Set for users linked to a platform account (organization owners and admins): they sign in with that account\'s password.',
    }),
  },
  { $id: 'SiteUser' },
);
export type SiteUserView = Static<typeof SiteUserView>;

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
