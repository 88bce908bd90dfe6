import { defineEntity, p } from '@mikro-orm/core';

export const Organization = defineEntity({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    uuid: p.uuid().primary().onCreate(() => crypto.randomUUID()),
    name: p.string().length(255),
    slug: p.string().length(100),
    is_active: p.boolean().default(true),
    created: p.datetime().onCreate(() => new Date()),
    modified: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type OrganizationEntity = InstanceType<typeof Organization.class>;

/** A user's membership of an organization. Groups: `member_groups`; site grants: `object_permissions`. */
export const Member = defineEntity({
  name: 'Member',
  tableName: 'organization_members',
  properties: {
    uuid: p.uuid().primary().onCreate(() => crypto.randomUUID()),
    organization_uuid: p.uuid(),
    user_uuid: p.uuid(),
    is_admin: p.boolean().default(false),
    is_owner: p.boolean().default(false),
    created: p.datetime().onCreate(() => new Date()),
    modified: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type MemberEntity = InstanceType<typeof Member.class>;
