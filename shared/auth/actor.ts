// Who is acting, and what they may do. Every service call carries an actor and its
// CASL ability; elevated work names a system actor explicitly (grep: systemActor).
import { AbilityBuilder, createMongoAbility, ForbiddenError, subject, type MongoAbility } from '@casl/ability';
import { rulesToCondition } from '@casl/ability/extra';
import { permissionDenied } from '../errors.ts';
import type { UserView } from '../users/user.schemas.ts';
import type { Grants, ObjectPermissionName } from '../permissions/grants.ts';

export interface UserActor {
  kind: 'user';
  uuid: string;
  username: string;
  is_superuser: boolean;
  is_staff: boolean;
  /** The user's record as authentication read it for this request (saves the profile a query). */
  user?: UserView;
  /** The site schema whose own user this is; null or absent for a platform user. */
  tenant?: string | null;
}
export interface SystemActor {
  kind: 'system';
  name: string;
}
export type Actor = UserActor | SystemActor;

export type Action = 'manage' | 'read' | 'create' | 'update' | 'delete' | ObjectPermissionName;
export type Subject = 'User' | 'Organization' | 'Site' | 'Group' | 'all';
export type AppAbility = MongoAbility<[Action, Subject | Record<string, unknown>]>;

/** Explicit elevation for operator commands and start-up work (migrate, bootstrap, CLI direct mode). */
export const systemActor = (name: string): SystemActor => ({ kind: 'system', name });

export function defineAbility(actor: Actor, grants?: Grants): AppAbility {
  const { can, cannot, build } = new AbilityBuilder<AppAbility>(createMongoAbility);
  if (actor.kind === 'system' || actor.is_superuser) {
    can('manage', 'all');
    return build();
  }
  // Object grants: one rule per permission over the objects that hold it.
  for (const [type, subjectType] of [['organization', 'Organization'], ['site', 'Site']] as const) {
    const byPermission = new Map<string, string[]>();
    for (const [uuid, perms] of grants?.[type] ?? []) {
      for (const p of perms) byPermission.set(p, [...(byPermission.get(p) ?? []), uuid]);
    }
    for (const [p, uuids] of byPermission) can(p as Action, subjectType, { uuid: { $in: uuids } });
  }
  can('create', 'Organization'); // anyone signed in may found one (and becomes its owner)
  can('read', 'Group'); // group names and permissions: needed to assign groups to members
  if (actor.is_staff) {
    // Staff administer ordinary users; superusers and the admin flags stay with superusers.
    can('read', 'User');
    can(['create', 'update', 'delete'], 'User', { is_superuser: false });
    can(['create', 'update', 'delete'], 'Group');
    cannot(['create', 'update'], 'User', ['is_superuser', 'is_staff', 'is_deleted']);
  } else {
    can('read', 'User', { uuid: actor.uuid });
    can('update', 'User', ['username', 'email', 'first_name', 'last_name', 'password'], { uuid: actor.uuid });
  }
  return build();
}

/** Whether the ability allows `action` on this object (no throw: for "hide it as 404" checks). */
export function allows(ability: AppAbility, action: Action, type: Subject, object: object): boolean {
  return ability.can(action, subject(type, { ...object }) as never);
}

/** Throws 403 PERMISSION_DENIED unless the ability allows it. */
export function authorize(ability: AppAbility, action: Action, type: Subject, object?: Record<string, unknown>, field?: string): void {
  const target = object ? subject(type, { ...object }) : type;
  try {
    ForbiddenError.from(ability).throwUnlessCan(action, target as never, field);
  } catch (err) {
    if (err instanceof ForbiddenError) throw permissionDenied();
    throw err;
  }
}

/**
 * The rows an ability lets `action` reach, as a Mongo-style condition (MikroORM's filter
 * language): `{}` for all, null for none. List queries add it to their WHERE.
 */
export function accessibleWhere(ability: AppAbility, action: Action, type: Subject): Record<string, unknown> | null {
  return rulesToCondition(
    ability.rulesFor(action, type),
    (rule) => (rule.inverted ? { $not: rule.conditions ?? {} } : (rule.conditions ?? {})) as Record<string, unknown>,
    {
      and: (conditions) => ({ $and: conditions }),
      or: (conditions) => ({ $or: conditions }),
      empty: () => ({}),
    },
  );
}
