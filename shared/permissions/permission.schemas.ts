import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';

export const PermissionRef = Type.Object({ id: Type.String({ minLength: 1, maxLength: 20, description: 'Permission id' }) });
export type PermissionRef = Static<typeof PermissionRef>;

export const PermissionView = Type.Object(
  { id: Type.Integer(), codename: Type.String(), name: Type.String(), model: Type.String({ description: '`organization` or `site`' }) },
  { $id: 'Permission' },
);
export type PermissionView = Static<typeof PermissionView>;

export const PermissionListQuery = Type.Object({
  model: Type.Optional(Type.String({ maxLength: 50, description: 'Only the permissions of this model (`site`, `organization`)' })),
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches codename or name' })),
  ...PageParams,
});
export type PermissionListQuery = Static<typeof PermissionListQuery>;
