import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';

const Name = Type.String({ minLength: 1, maxLength: 150, description: 'Unique, case-insensitively' });
const Codenames = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100, description: 'Permission codenames (`view_site`, …)' });

/** `/api/cloud/groups/{id}/`: the group's integer id. */
export const GroupRef = Type.Object({ id: Type.String({ minLength: 1, maxLength: 20, description: 'Group id' }) });
export type GroupRef = Static<typeof GroupRef>;

export const GroupView = Type.Object(
  { id: Type.Integer(), name: Type.String(), permissions: Type.Array(Type.String(), { description: 'Permission codenames' }) },
  { $id: 'Group' },
);
export type GroupView = Static<typeof GroupView>;

export const GroupCreate = Type.Object({ name: Name, permissions: Type.Optional(Codenames) }, { additionalProperties: false });
export type GroupCreate = Static<typeof GroupCreate>;

export const GroupUpdate = Type.Object(
  { name: Type.Optional(Name), permissions: Type.Optional(Codenames), ...readOnlyProps(GroupView, ['id']) },
  { additionalProperties: false, description: 'Fields left out keep their values; `permissions` replaces the whole set. A body sent back from GET works (`id` unchanged is ignored).' },
);
export type GroupUpdate = Static<typeof GroupUpdate>;

export const GroupListQuery = Type.Object({
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches the name' })),
  ordering: Type.Optional(Type.String({ maxLength: 100, description: 'name or id; a leading - reverses (default name)' })),
  ...PageParams,
});
export type GroupListQuery = Static<typeof GroupListQuery>;

export const GROUP_MESSAGES = {
  created: 'Group created successfully.',
  deleted: 'Group deleted.',
} as const;
