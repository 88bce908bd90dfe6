// Who is acting, and what they may do. Every service call carries an actor and its
// CASL ability; elevated work names a system actor explicitly (grep: systemActor).
import { AbilityBuilder, createMongoAbility, subject, type MongoAbility } from '@casl/ability';
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

/**
 * Actions. CRUD on every subject; `materialize` (data tables) and `rotate` (secret keys, the
 * operators' only) as the spec names them; the platform's object permissions by codename.
 */
export type Action = 'manage' | 'read' | 'create' | 'update' | 'delete' | 'materialize' | 'rotate' | 'execute' | ObjectPermissionName;

/** Control-plane subjects: a platform user's rules reach these only. */
export type PlatformSubject = 'User' | 'Organization' | 'Site' | 'Group';
/** Subjects inside one site: a site user's rules reach these only, and only in its own site. */
export type SiteSubject = keyof SiteSubjects;
export type Subject = PlatformSubject | SiteSubject | 'all';

/**
 * What a decision sees of each site subject: every one names its site (`schema`); the rest is
 * what a per-app policy will match on (the app's slug, the table's name). A check before the
 * lookup passes only the attributes it knows (`{ schema }`, or `{ schema, app }` for a list).
 */
export interface SiteSubjects {
  /** The site itself, as its users see it (its directory of public profiles). */
  Tenant: { schema: string };
  App: { schema: string; slug: string };
  DataSource: { schema: string; app: string; slug: string };
  DataTable: { schema: string; app: string; name: string };
  /** The records of one table (per-row conditions: records/access.ts). */
  Record: { schema: string; app: string; table: string };
  /** `app` null: a tenant-wide secret. */
  Secret: { schema: string; app: string | null; key: string };
  SecretType: { schema: string; slug: string };
  SiteUser: { schema: string; uuid: string; is_superuser: boolean };
  /** A role of an app (apps/app-roles.service.ts): metadata every user of the site may read. */
  AppRole: { schema: string; app: string; name: string };
  /** Who holds an app role (`user`: the site user's UUID): the site's administrators' only. */
  AppRoleAssignment: { schema: string; app: string; role: string; user: string };
  /** A storage bucket of an app: every user of the site reads them; administrators manage them. */
  Bucket: { schema: string; app: string; slug: string };
  /** The objects of one bucket (per-object rules: visibility, owner, policies: storage/access.ts). */
  StorageObject: { schema: string; app: string; bucket: string };
  /** A social login provider of the site: every user reads it; superusers (the organization's owners and admins among them) manage it. */
  SocialApp: { schema: string };
  /** A function of an app: every user of the site may execute it (the app's policies decide further); administrators manage it and read its code. */
  Function: { schema: string; app: string; slug: string };
  /** The site's event subscriptions (spec Part 1 §6): every user reads them; administrators manage them. */
  EventSubscription: { schema: string };
  /** A frontend worker of the site (static hosting): administrators manage workers and their builds; what a worker serves is public. */
  FrontendWorker: { schema: string; slug: string };
}

export type AppAbility = MongoAbility<[Action, Subject | Record<string, unknown>]>;

/** Explicit elevation for operator commands and start-up work (migrate, bootstrap, CLI direct mode). */
export const systemActor = (name: string): SystemActor => ({ kind: 'system', name });

/** The grants a user holds beyond the flags of its account, loaded on first need (permissions/grants.ts). */
export interface HeldGrants {
  /** A platform user's organization and site grants. */
  platform?: Grants;
  /** A site user's permission codenames in its site (directly and through the site's groups). */
  site?: ReadonlySet<string>;
}

const PLATFORM_SUBJECTS: PlatformSubject[] = ['User', 'Organization', 'Site', 'Group'];
const SITE_SUBJECTS: SiteSubject[] = ['Tenant', 'App', 'DataSource', 'DataTable', 'Record', 'Secret', 'SecretType', 'SiteUser', 'AppRole', 'AppRoleAssignment', 'Bucket', 'StorageObject', 'SocialApp', 'Function', 'EventSubscription', 'FrontendWorker'];
/** What a user may change of their own account (platform profile, site profile). */
const PROFILE_FIELDS = ['username', 'email', 'first_name', 'last_name', 'password'];
/** Admin flags: superusers' to give (staff neither give nor take them). */
const ADMIN_FIELDS = ['is_superuser', 'is_staff', 'is_deleted'];

/** Site permissions (codenames of "<schema>".permissions) that become rules, and what they allow. */
const SITE_PERMISSION_RULES: [codename: string, action: Action, subjects: SiteSubject[]][] = [
  ['view_secret', 'read', ['Secret', 'SecretType']],
  ['add_secret', 'create', ['Secret', 'SecretType']],
  ['change_secret', 'update', ['Secret', 'SecretType']],
  ['delete_secret', 'delete', ['Secret', 'SecretType']],
];
/** The site subjects whose rules depend on the site's stored permissions (loaded only for them). */
export const SITE_GRANT_SUBJECTS: ReadonlySet<SiteSubject> = new Set(SITE_PERMISSION_RULES.flatMap(([, , subjects]) => subjects));

type Builder = AbilityBuilder<AppAbility>;

/**
 * The one ability of a request. The system actor may do everything; a platform user's rules
 * reach platform subjects only, a site user's the subjects of its own site only (conditioned on
 * `schema`), whatever their admin flags.
 */
export function defineAbility(actor: Actor, grants: HeldGrants = {}): AppAbility {
  const builder = new AbilityBuilder<AppAbility>(createMongoAbility);
  if (actor.kind === 'system') builder.can('manage', 'all');
  else if (actor.tenant) siteRules(builder, actor, actor.tenant, grants.site);
  else platformRules(builder, actor, grants.platform);
  return builder.build();
}

function platformRules({ can, cannot }: Builder, actor: UserActor, grants: Grants | undefined): void {
  if (actor.is_superuser) {
    can('manage', PLATFORM_SUBJECTS);
    return;
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
    cannot(['create', 'update'], 'User', ADMIN_FIELDS);
  } else {
    can('read', 'User', { uuid: actor.uuid });
    can('update', 'User', PROFILE_FIELDS, { uuid: actor.uuid });
  }
}

/**
 * A site user in its site: every user enters it and reads its apps, data sources, tables and
 * app roles (not who holds them), acts on records as the app's policies allow, and reads and
 * edits their own profile (not their attributes: those feed the policies); secrets follow the
 * site permissions held;
 * superusers and staff administer everything of the site, but staff neither touch superusers
 * nor give the admin flags. Key rotation stays with operators.
 */
function siteRules({ can, cannot }: Builder, actor: UserActor, schema: string, permissions: ReadonlySet<string> | undefined): void {
  const site = { schema };
  const self = { schema, uuid: actor.uuid };
  can('read', ['Tenant', 'App', 'DataSource', 'DataTable', 'AppRole'], site);
  // Records: every action, for the app's policies to decide per table and row (policies/hook.ts).
  can(['read', 'create', 'update', 'delete'], 'Record', site);
  // Storage: buckets are read by all; objects are decided per object (visibility, owner, policies).
  can('read', 'Bucket', site);
  can(['read', 'create', 'update', 'delete'], 'StorageObject', site);
  can('read', 'SocialApp', site);
  can('execute', 'Function', site);
  can('read', 'EventSubscription', site);
  can('read', 'SiteUser', self);
  can('update', 'SiteUser', PROFILE_FIELDS, self);
  for (const [codename, action, subjects] of SITE_PERMISSION_RULES) if (permissions?.has(codename)) can(action, subjects, site);
  if (actor.is_superuser || actor.is_staff) can('manage', SITE_SUBJECTS, site);
  if (actor.is_staff && !actor.is_superuser) {
    cannot(['create', 'update', 'delete'], 'SiteUser', { is_superuser: true });
    cannot(['create', 'update'], 'SiteUser', ADMIN_FIELDS);
  }
  if (!actor.is_superuser) cannot(['create', 'update', 'delete'], 'SocialApp');
  cannot('rotate', 'Secret');
}

/** Whether the ability allows `action` on this object (no throw: for "hide it as 404" checks). */
export function allows(ability: AppAbility, action: Action, type: Subject, object: object): boolean {
  return ability.can(action, subject(type, { ...object }) as never);
}

/** Throws 403 PERMISSION_DENIED unless the ability allows it. */
export function authorize(ability: AppAbility, action: Action, type: Subject, object?: Record<string, unknown>, field?: string): void {
  const target = object ? subject(type, { ...object }) : type;
  // ability.can, not ForbiddenError.from(…).throwUnlessCan: that builds an Error (a stack trace) on every check.
  if (!ability.can(action, target as never, field)) throw permissionDenied();
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
