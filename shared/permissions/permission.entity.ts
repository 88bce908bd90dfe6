import { defineEntity, p } from '@mikro-orm/core';

/** A permission codename (`view_site`, …) of a model (`organization`, `site`). Seeded by migration. */
export const Permission = defineEntity({
  name: 'Permission',
  tableName: 'permissions',
  properties: {
    id: p.integer().primary().autoincrement(),
    codename: p.string().length(100),
    name: p.string().length(255),
    model: p.string().length(50),
  },
});
export type PermissionEntity = InstanceType<typeof Permission.class>;

/** A named set of permissions; members get them through `member_groups`. */
export const Group = defineEntity({
  name: 'Group',
  tableName: 'groups',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string().length(150),
    created: p.datetime().onCreate(() => new Date()),
    modified: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type GroupEntity = InstanceType<typeof Group.class>;

/** A permission on one organization or site, held by a user or a group. */
export const ObjectPermission = defineEntity({
  name: 'ObjectPermission',
  tableName: 'object_permissions',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    user_uuid: p.uuid().nullable(),
    group_id: p.integer().nullable(),
    permission_id: p.integer(),
    object_type: p.enum(['organization', 'site'] as const),
    object_uuid: p.uuid(),
    created: p.datetime().onCreate(() => new Date()),
  },
});
