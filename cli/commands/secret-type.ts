// `platform secret-type …`: a site's secret types, JSON Schemas for secret values (/sites/<site>/api/secret-types/).
import fs from 'node:fs';
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { SecretTypeView } from '../../shared/secrets/secret-type.schemas.ts';
import { path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags } from '../flags.ts';
import { pageTable, type Column } from '../output.ts';
import { parseJson, siteFlag } from '../flags.ts';

const typeArg = { type: Args.string({ name: 'type', description: 'Slug or UUID of the secret type', required: true }) };

const COLUMNS: Column<SecretTypeView>[] = [
  { header: 'Slug', get: (t) => t.slug },
  { header: 'Name', get: (t) => t.name },
  { header: 'Description', get: (t) => t.description },
  { header: 'Schema', get: (t) => JSON.stringify(t.json_schema) },
];

export const SECRET_TYPE_COMMANDS = {
  'secret-type:list': operation({
    summary: 'List the secret types of a site.',
    examples: ['secret-type list --site shop_prod'],
    flags: { site: siteFlag, search: Flags.string({ summary: 'Matches name, slug or description.' }), ...pageFlags },
    request: ({ flags: f }) => ({ method: 'GET', site: f.site, path: '/api/secret-types/', query: { search: f.search, page: f.page, page_size: f['page-size'] } }),
    render: (page: PageEnvelope<SecretTypeView>) => pageTable(page, COLUMNS, ['secret type', 'secret types']),
  }),

  'secret-type:create': operation({
    summary: 'Create a secret type: a name and the JSON Schema its values must satisfy.',
    examples: [
      'secret-type create --site shop_prod --name "API token" --schema \'{"type":"string","minLength":20}\'',
      'secret-type create --site shop_prod --name "DB credentials" --schema-file db.schema.json',
    ],
    flags: {
      site: siteFlag,
      name: Flags.string({ summary: 'The name (the slug is made from it).', required: true }),
      slug: Flags.string({ summary: 'The slug, instead of one made from the name.' }),
      description: Flags.string({ summary: 'What the type is for.' }),
      schema: Flags.string({ summary: 'The JSON Schema, as JSON text (default {}: any value).', exclusive: ['schema-file'] }),
      'schema-file': Flags.string({ summary: 'A file holding the JSON Schema.' }),
    },
    request: ({ flags: f }) => {
      const schema = f['schema-file'] !== undefined ? fs.readFileSync(f['schema-file'], 'utf8') : f.schema;
      const json_schema = schema === undefined ? undefined : parseJson(schema, 'json_schema');
      return { method: 'POST', site: f.site, path: '/api/secret-types/', body: { name: f.name, slug: f.slug, description: f.description, json_schema } };
    },
  }),

  'secret-type:get': operation({
    summary: 'Show a secret type of a site.',
    examples: ['secret-type get api-token --site shop_prod'],
    args: typeArg,
    flags: { site: siteFlag },
    request: ({ flags, args }) => ({ method: 'GET', site: flags.site, path: path`/api/secret-types/${args.type}/` }),
  }),

  'secret-type:delete': operation({
    summary: 'Delete a secret type of a site (refused while secrets use it).',
    examples: ['secret-type delete api-token --site shop_prod'],
    args: typeArg,
    flags: { site: siteFlag },
    request: ({ flags, args }) => ({ method: 'DELETE', site: flags.site, path: path`/api/secret-types/${args.type}/` }),
  }),
};
