// The one ability: which subjects each kind of actor reaches (no database: the rules alone).
import test from 'ava';
import { subject } from '@casl/ability';
import { allows, defineAbility, SITE_GRANT_SUBJECTS, systemActor, type Action, type Subject, type UserActor } from './actor.ts';

const SITE = 'site_aaaa';
const OTHER = 'site_bbbb';
const uuid = (n: number) => `00000000-0000-4000-8000-00000000000${n}`;
const siteUser = (flags: Partial<UserActor> = {}): UserActor => ({ kind: 'user', uuid: uuid(1), username: 'u', is_superuser: false, is_staff: false, tenant: SITE, ...flags });
const platformUser = (flags: Partial<UserActor> = {}): UserActor => ({ kind: 'user', uuid: uuid(2), username: 'p', is_superuser: false, is_staff: false, tenant: null, ...flags });

/** One check on an object of `type` (with field when given). */
const can = (ability: ReturnType<typeof defineAbility>, action: Action, type: Subject, object: object, field?: string) =>
  field === undefined ? allows(ability, action, type, object) : ability.can(action, subject(type, { ...object }) as never, field);

const SITE_OBJECTS: [Subject, object][] = [
  ['Tenant', { schema: SITE }],
  ['App', { schema: SITE, slug: 'shop' }],
  ['DataSource', { schema: SITE, app: 'shop', slug: 'main' }],
  ['DataTable', { schema: SITE, app: 'shop', name: 'orders' }],
  ['Record', { schema: SITE, app: 'shop', table: 'orders' }],
  ['Secret', { schema: SITE, app: null, key: 'API_KEY' }],
  ['SecretType', { schema: SITE, slug: 'token' }],
  ['SiteUser', { schema: SITE, uuid: uuid(3), is_superuser: false }],
];
const elsewhere = (object: object) => ({ ...object, schema: OTHER });

test('a site superuser administers its own site only: nothing on the platform, nothing in another site', (t) => {
  const ability = defineAbility(siteUser({ is_superuser: true, is_staff: true }));
  t.false(ability.can('manage', 'all'));
  for (const [type, object] of SITE_OBJECTS) {
    for (const action of ['read', 'create', 'update', 'delete'] as const) {
      t.true(can(ability, action, type, object), `${action} ${type}`);
      t.false(can(ability, action, type, elsewhere(object)), `${action} ${type} of another site`);
    }
  }
  t.true(can(ability, 'materialize', 'DataTable', { schema: SITE, app: 'shop', name: 'orders' }));
  t.false(can(ability, 'read', 'User', { uuid: uuid(1) }), 'not even a platform user of the same uuid');
  t.false(ability.can('create', 'Organization'));
  t.false(can(ability, 'view_organization', 'Organization', { uuid: uuid(4) }));
  t.false(can(ability, 'view_site', 'Site', { uuid: uuid(5) }));
  t.false(ability.can('read', 'Group'));
});

test('a platform superuser manages platform subjects and reaches no site subject', (t) => {
  const ability = defineAbility(platformUser({ is_superuser: true }));
  t.true(can(ability, 'delete', 'User', { uuid: uuid(3), is_superuser: true }));
  t.true(can(ability, 'delete_site', 'Site', { uuid: uuid(5) }));
  for (const [type, object] of SITE_OBJECTS) t.false(can(ability, 'read', type, object), `read ${type}`);
});

test('every user of a site reads its apps, data sources and tables, and writes none; records are left to the app\'s policies, in its own site only', (t) => {
  const ability = defineAbility(siteUser());
  for (const [type, object] of SITE_OBJECTS.filter(([type]) => ['Tenant', 'App', 'DataSource', 'DataTable'].includes(type))) {
    t.true(can(ability, 'read', type, object), `read ${type}`);
    t.false(can(ability, 'read', type, elsewhere(object)), `read ${type} of another site`);
    t.false(can(ability, 'update', type, object), `update ${type}`);
  }
  const [, record] = SITE_OBJECTS.find(([type]) => type === 'Record')!;
  for (const action of ['read', 'create', 'update', 'delete'] as const) {
    t.true(can(ability, action, 'Record', record), `${action} Record (policies decide per table and row)`);
    t.false(can(ability, action, 'Record', elsewhere(record)), `${action} Record of another site`);
  }
  t.false(can(ability, 'materialize', 'DataTable', { schema: SITE, app: 'shop', name: 'orders' }));
  t.false(can(ability, 'read', 'Secret', { schema: SITE, app: null, key: 'K' }), 'no secret without a permission');
  t.false(can(ability, 'read', 'SiteUser', { schema: SITE }), 'site users are the admins\' to list');
  t.true(can(ability, 'read', 'SiteUser', { schema: SITE, uuid: uuid(1) }), 'their own profile');
  t.true(can(ability, 'update', 'SiteUser', { schema: SITE, uuid: uuid(1), is_superuser: false }, 'first_name'));
  t.false(can(ability, 'update', 'SiteUser', { schema: SITE, uuid: uuid(1), is_superuser: false }, 'is_staff'), 'not their own flags');
  t.false(can(ability, 'update', 'SiteUser', { schema: SITE, uuid: uuid(3), is_superuser: false }, 'first_name'), 'nor someone else');
});

test('secret permissions held in the site become exactly their action on secrets and secret types', (t) => {
  const viewer = defineAbility(siteUser(), { site: new Set(['view_secret', 'view_user', 'add_user']) });
  const adder = defineAbility(siteUser(), { site: new Set(['add_secret']) });
  for (const type of ['Secret', 'SecretType'] as const) {
    const object = { schema: SITE, key: 'K', slug: 's', app: null };
    t.true(can(viewer, 'read', type, object));
    t.false(can(viewer, 'create', type, object));
    t.false(can(viewer, 'read', type, elsewhere(object)), 'only in its own site');
    t.true(can(adder, 'create', type, object));
    t.false(can(adder, 'read', type, object));
  }
  t.false(can(viewer, 'read', 'SiteUser', { schema: SITE }), 'user permissions are not site-user administration');
  t.deepEqual([...SITE_GRANT_SUBJECTS].sort(), ['Secret', 'SecretType']);
});

test('site staff administer ordinary site users, not superusers nor the admin flags', (t) => {
  const ability = defineAbility(siteUser({ is_staff: true }));
  const ordinary = { schema: SITE, uuid: uuid(3), is_superuser: false };
  const superuser = { schema: SITE, uuid: uuid(4), is_superuser: true };
  t.true(can(ability, 'read', 'SiteUser', superuser));
  t.true(can(ability, 'update', 'SiteUser', ordinary));
  t.true(can(ability, 'update', 'SiteUser', { schema: SITE }), 'the check before the lookup passes');
  for (const action of ['create', 'update', 'delete'] as const) t.false(can(ability, action, 'SiteUser', superuser), `${action} a superuser`);
  for (const field of ['is_superuser', 'is_staff', 'is_deleted']) t.false(can(ability, 'update', 'SiteUser', ordinary, field), field);
  t.true(can(ability, 'update', 'SiteUser', ordinary, 'email'));
  t.true(can(defineAbility(siteUser({ is_staff: true, is_superuser: true })), 'update', 'SiteUser', superuser, 'is_staff'), 'superusers do');
});

test('key rotation is the operators\': the system actor only', (t) => {
  t.true(defineAbility(systemActor('cli')).can('rotate', 'Secret'));
  t.false(defineAbility(siteUser({ is_superuser: true })).can('rotate', 'Secret'));
  t.false(can(defineAbility(siteUser({ is_superuser: true })), 'rotate', 'Secret', { schema: SITE }));
  t.false(defineAbility(platformUser({ is_superuser: true })).can('rotate', 'Secret'));
});
