// Who is acting, and what they may do. Every service call carries an actor and its
// CASL ability; elevated work names a system actor explicitly (grep: systemActor).
import { AbilityBuilder, createMongoAbility, ForbiddenError, subject, type MongoAbility } from '@casl/ability';
import { rulesToCondition } from '@casl/ability/extra';
import { permissionDenied } from '../errors.ts';
import type { UserView } from '../users/user.schemas.ts';

export interface UserActor {
  kind: 'user';
  uuid: string;
  username: string;
  is_superuser: boolean;
  is_staff: boolean;
  /** The user's record as authentication read it for this request (saves the profile a query). */
  user?: UserView;
}
export interface SystemActor {
  kind: 'system';
  name: string;
}
export type Actor = UserActor | SystemActor;

export type Action = 'manage' | 'read' | 'create' | 'update' | 'delete';
export type Subject = 'User' | 'all';
export type AppAbility = MongoAbility<[Action, Subject | Record<string, unknown>]>;

/** Explicit elevation for operator commands and start-up work (migrate, bootstrap, CLI direct mode). */
export const systemActor = (name: string): SystemActor => ({ kind: 'system', name });

export function defineAbility(actor: Actor): AppAbility {
  const { can, cannot, build } = new AbilityBuilder<AppAbility>(createMongoAbility);
  if (actor.kind === 'system' || actor.is_superuser) {
    can('manage', 'all');
  } else if (actor.is_staff) {
    // Staff administer ordinary users; superusers and the admin flags stay with superusers.
    can('read', 'User');
    can(['create', 'update', 'delete'], 'User', { is_superuser: false });
    cannot(['create', 'update'], 'User', ['is_superuser', 'is_staff']);
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
