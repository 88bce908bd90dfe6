import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { StringEnum } from '../common/validation.ts';
import { ORGANIZATION_PERMISSIONS, SITE_PERMISSIONS } from '../permissions/grants.ts';
import { USERNAME_PATTERN } from '../users/user.schemas.ts';

export const INVITATION_STATES = ['pending', 'accepted', 'cancelled', 'expired'] as const;
export type InvitationState = (typeof INVITATION_STATES)[number];

const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/** `{org}`: slug or UUID. */
export const OrgRef = Type.Object({ org: Type.String({ minLength: 1, maxLength: 100, description: 'Organization slug or UUID' }) });

/** `{org}` and one invitation: its UUID (the integer id is accepted too). */
export const InvitationRef = Type.Object({
  org: Type.String({ minLength: 1, maxLength: 100, description: 'Organization slug or UUID' }),
  invitation: Type.String({ minLength: 1, maxLength: 36, description: 'Invitation UUID or integer id' }),
});
export type InvitationRef = Static<typeof InvitationRef>;

/** The public routes' `{token}`. */
export const InvitationToken = Type.Object({ token: Type.String({ format: 'uuid', description: 'The token from the invitation e-mail' }) });

export const SiteGrant = Type.Object(
  {
    slug: Type.String({ minLength: 1, maxLength: 100, description: 'A site of this organization (slug or UUID)' }),
    permissions: Type.Array(StringEnum(SITE_PERMISSIONS), { maxItems: 50 }),
  },
  { additionalProperties: false },
);

export const InvitationConfigInput = Type.Object(
  {
    group: Type.Optional(
      Type.Array(Type.Union([Type.Integer({ minimum: 1 }), Type.String({ minLength: 1, maxLength: 150 })]), {
        maxItems: 50,
        description: 'Groups the new member joins: ids or names (stored as ids)',
      }),
    ),
    site: Type.Optional(Type.Array(SiteGrant, { maxItems: 100, description: 'Site permissions granted on acceptance' })),
  },
  { additionalProperties: false },
);

export const InvitationCreate = Type.Object(
  {
    invitee_identifier: Type.String({ format: 'email', maxLength: 254, description: 'E-mail of the invitee' }),
    permissions: Type.Optional(
      Type.Array(StringEnum(ORGANIZATION_PERMISSIONS), {
        maxItems: 50,
        description: 'Organization permissions granted on acceptance',
      }),
    ),
    invitation_config: Type.Optional(InvitationConfigInput),
  },
  { additionalProperties: false },
);
export type InvitationCreate = Static<typeof InvitationCreate>;

export const InvitationListQuery = Type.Object({
  state: Type.Optional(StringEnum(INVITATION_STATES)),
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Part of the invitee e-mail' })),
  ...PageParams,
});
export type InvitationListQuery = Static<typeof InvitationListQuery>;

/** The stored (normalized) configuration: groups as ids, sites by their slug. */
export interface StoredInvitationConfig {
  group?: number[];
  site?: { slug: string; permissions: string[] }[];
}

export const InvitationView = Type.Object({
  id: Type.Integer(),
  uuid: Type.String({ format: 'uuid' }),
  invitee_identifier: Type.String(),
  permissions: Type.Array(Type.String()),
  invitation_config: Type.Object({
    group: Type.Optional(Type.Array(Type.Integer())),
    site: Type.Optional(Type.Array(Type.Object({ slug: Type.String(), permissions: Type.Array(Type.String()) }))),
  }),
  state: StringEnum(INVITATION_STATES),
  organization: Type.String({ description: 'Organization slug' }),
  invited_by: Type.Union([Type.String(), Type.Null()], { description: 'Username of the inviter (null: an operator through the CLI)' }),
  accepted_by: Type.Union([Type.String(), Type.Null()]),
  created: Timestamp,
  expires_at: Timestamp,
  accepted_at: NullableTimestamp,
  cancelled_at: NullableTimestamp,
  last_sent_at: NullableTimestamp,
  sent_count: Type.Integer(),
});
export type InvitationView = Static<typeof InvitationView>;

export const InvitationResent = Type.Object({ status: Type.Literal('success'), message: Type.String(), data: InvitationView });

/** GET /api/cloud/invitations/{token}/details/ (public): what the invitee needs to decide, names only. */
export const InvitationDetails = Type.Object({
  organization: Type.Object({ name: Type.String(), slug: Type.String() }),
  invitee_identifier: Type.String(),
  state: StringEnum(INVITATION_STATES),
  account_exists: Type.Boolean({
    description: 'Whether an account with the invited e-mail exists: then accepting needs that account\'s bearer token or its password in the body',
  }),
  invited_by: Type.Union([Type.String(), Type.Null()]),
  created: Timestamp,
  expires_at: Timestamp,
  permissions: Type.Array(Type.String()),
  groups: Type.Array(Type.String()),
  sites: Type.Array(Type.Object({ slug: Type.String(), name: Type.String(), permissions: Type.Array(Type.String()) })),
});
export type InvitationDetails = Static<typeof InvitationDetails>;

/** The accept body: all optional (an empty POST, as the e-mail's button sends, is fine). */
export const AcceptInput = Type.Object(
  {
    username: Type.Optional(Type.String({ minLength: 1, maxLength: 150, pattern: USERNAME_PATTERN, description: 'New account only: its username (default: from the e-mail)' })),
    password: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 128,
        description: 'New account: its password (default: generated and returned once). Existing account with the invited e-mail: its password, to accept as it (or send its bearer token)',
      }),
    ),
    first_name: Type.Optional(Type.String({ maxLength: 150, description: 'New account only' })),
    last_name: Type.Optional(Type.String({ maxLength: 150, description: 'New account only' })),
  },
  { additionalProperties: false },
);
export type AcceptInput = Static<typeof AcceptInput>;

export const AcceptResult = Type.Object({
  organization: Type.String({ description: 'Organization slug' }),
  username: Type.String(),
  created: Type.Boolean({ description: 'Whether a new user was created for the invitee' }),
  password: Type.Optional(Type.String({ description: 'Only when a user was created: its generated password, shown once' })),
});
export type AcceptResult = Static<typeof AcceptResult>;

export const AcceptBody = Type.Object({ status: Type.Literal('success'), message: Type.String(), data: AcceptResult });
