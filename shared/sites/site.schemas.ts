import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { BoolParam } from '../common/filters.ts';
import { StringEnum } from '../common/validation.ts';
import { SITE_ENVIRONMENTS } from './site.entity.ts';

const Environment = StringEnum(SITE_ENVIRONMENTS);
/** On create: what the server's ENVIRONMENT gives when left out. */
const CreateEnvironment = StringEnum(SITE_ENVIRONMENTS, {
  description: "The site's environment. Left out: from the server's ENVIRONMENT (production → production, staging → staging, dev → development, test → testing).",
});
const Settings = Type.Record(Type.String(), Type.Unknown(), { description: 'Free-form JSON configuration' });

/** `/api/cloud/sites/:site/`: a site slug or UUID. */
export const SiteRef = Type.Object({ site: Type.String({ minLength: 1, maxLength: 100, description: 'Site slug or UUID' }) });
export type SiteRef = Static<typeof SiteRef>;

/** `/api/cloud/organizations/:org/sites/`. */
export const OrgSitesRef = Type.Object({ org: Type.String({ minLength: 1, maxLength: 100, description: 'Organization slug or UUID' }) });

const Timestamp = Type.String({ format: 'date-time' });

export const SiteView = Type.Object({
  uuid: Type.String({ format: 'uuid' }),
  slug: Type.String(),
  name: Type.String(),
  description: Type.String(),
  schema_name: Type.String(),
  environment: Environment,
  is_active: Type.Boolean(),
  site_settings: Settings,
  organization: Type.String({ description: 'Slug of the owning organization' }),
  primary_domain: Type.Union([Type.String(), Type.Null()], { description: 'Host name of the primary domain' }),
  created_at: Timestamp,
  modified_at: Timestamp,
});
export type SiteView = Static<typeof SiteView>;

export const SiteCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
    environment: Type.Optional(CreateEnvironment),
    schema_name: Type.Optional(Type.String({ minLength: 1, maxLength: 63, description: 'Start with a letter or underscore; lowercase letters, digits, underscores' })),
    site_settings: Type.Optional(Settings),
    domain: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'A customer domain to add, unverified until its DNS TXT record proves it (docs/domains.md); the primary domain is always `{slug}.{PLATFORM_BASE_DOMAIN}`' })),
    cluster: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'Platform superusers and the system only: the PostgreSQL cluster that holds the site (`platform cluster list`); left out, the active cluster with the fewest sites (docs/scale-out.md)' })),
  },
  {
    additionalProperties: false,
    description:
      'The name receives the ENVIRONMENT prefix (`dev-`, `test-`, `staging-`; none in production). Schema, tenant migrations, default data and the primary domain are created in one transaction.',
  },
);
export type SiteCreate = Static<typeof SiteCreate>;

export const SiteUpdate = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
    is_active: Type.Optional(Type.Boolean()),
    site_settings: Type.Optional(Settings),
    environment: Type.Optional(Environment),
    ...readOnlyProps(SiteView, ['uuid', 'slug', 'schema_name', 'organization', 'primary_domain', 'created_at']),
    ...readOnlyProps(SiteView, ['modified_at'], 'maintained'),
  },
  {
    additionalProperties: false,
    description: 'Fields left out keep their values; no prefix is applied on update. A body sent back from GET works (read-only fields unchanged are ignored).',
  },
);
export type SiteUpdate = Static<typeof SiteUpdate>;

export const SiteListQuery = Type.Object({
  environment: Type.Optional(Environment),
  is_active: Type.Optional(BoolParam),
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches name or schema_name' })),
  ordering: Type.Optional(Type.String({ maxLength: 200, description: 'name, created_at, updated_at (= modified_at); - for descending; comma-separated' })),
  ...PageParams,
});
export type SiteListQuery = Static<typeof SiteListQuery>;

export const Privileges = Type.Object({ permissions: Type.Array(Type.String()) });
export type Privileges = Static<typeof Privileges>;

/** GET /api/cloud/sites/config/: the site of the request host (public; no secrets, no internal ids of the organization). */
export const SiteConfig = SiteView;
export type SiteConfig = SiteView;
