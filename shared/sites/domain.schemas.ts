import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { BoolParam } from '../common/filters.ts';

const Host = Type.String({ minLength: 1, maxLength: 253, description: 'Host name (RFC 1123, lowercase; no scheme, port or trailing dot)' });
const Primary = Type.Boolean({ description: "The site's primary domain (true makes every other domain of the site non-primary; a customer domain must be verified first)" });
const Active = Type.Boolean({ description: 'Whether the host is routed (default true)' });

/** `/api/cloud/sites/:site/domains/:domain/`: the domain's slug, host name or UUID. */
export const DomainRef = Type.Object({
  site: Type.String({ minLength: 1, maxLength: 100, description: 'Site slug or UUID' }),
  domain: Type.String({ minLength: 1, maxLength: 253, description: 'Domain slug, host name or UUID' }),
});
export type DomainRef = Static<typeof DomainRef>;

export const DomainView = Type.Object({
  uuid: Type.String({ format: 'uuid' }),
  slug: Type.String(),
  domain: Type.String(),
  is_primary: Type.Boolean(),
  is_active: Type.Boolean(),
  tenant: Type.String({ format: 'uuid', description: 'UUID of the owning site' }),
  created_at: Type.String({ format: 'date-time' }),
  modified_at: Type.String({ format: 'date-time' }),
  is_verified: Type.Boolean({ description: 'Whether the host routes: a name the platform assigned, or a customer domain proven by its DNS TXT record (docs/domains.md)' }),
  verified_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When it was verified; null while unverified' }),
  verification: Type.Union(
    [Type.Object({ type: Type.Literal('TXT'), name: Type.String(), value: Type.String() }), Type.Null()],
    { description: 'The DNS record that proves a customer domain (publish it, then POST …/verify/); null for a name the platform assigned' },
  ),
});
export type DomainView = Static<typeof DomainView>;

export const DomainCreate = Type.Object(
  { domain: Host, is_primary: Type.Optional(Primary), is_active: Type.Optional(Active) },
  { additionalProperties: false, description: '`is_primary: true` makes every other domain of the site non-primary.' },
);
export type DomainCreate = Static<typeof DomainCreate>;

const DomainReadOnly = {
  ...readOnlyProps(DomainView, ['uuid', 'slug', 'tenant', 'created_at']),
  ...readOnlyProps(DomainView, ['modified_at', 'is_verified', 'verified_at', 'verification'], 'maintained'),
};

/** PUT: `domain` required, the flags optional (left out: unchanged); a body sent back from GET works. */
export const DomainReplace = Type.Object(
  { domain: Host, is_primary: Type.Optional(Primary), is_active: Type.Optional(Active), ...DomainReadOnly },
  { additionalProperties: false },
);

/** PATCH: any of the fields. */
export const DomainUpdate = Type.Object(
  { domain: Type.Optional(Host), is_primary: Type.Optional(Primary), is_active: Type.Optional(Active), ...DomainReadOnly },
  { additionalProperties: false },
);
export type DomainUpdate = Static<typeof DomainUpdate>;

export const DomainListQuery = Type.Object({
  is_active: Type.Optional(BoolParam),
  is_primary: Type.Optional(BoolParam),
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches the host name' })),
  ordering: Type.Optional(Type.String({ maxLength: 200, description: 'domain, is_primary, is_active, created_at, modified_at; - for descending; default `-is_primary,domain`' })),
  ...PageParams,
});
export type DomainListQuery = Static<typeof DomainListQuery>;
