// `platform secret-type …`: a site's secret types, JSON Schemas for secret values (/sites/<site>/api/secret-types/).
import fs from 'node:fs';
import { Flags } from '@oclif/core';
import type { SecretTypeView } from '../../shared/secrets/secret-type.schemas.ts';
import { api } from '../base.ts';
import { parseJson } from '../flags.ts';
import { pageOf } from '../output.ts';

export const SECRET_TYPE_COMMANDS = {
  'secret-type:list': api('secret_types_list', {
    examples: ['secret-type list --site shop_prod'],
    render: pageOf<SecretTypeView>(['secret type', 'secret types'], 'slug name description json_schema:schema', { json_schema: (t) => JSON.stringify(t.json_schema) }),
  }),
  'secret-type:create': api('secret_types_create', {
    examples: ['secret-type create --site shop_prod --name "API token" --schema \'{"type":"string","minLength":20}\'', 'secret-type create --site shop_prod --name "DB credentials" --schema-file db.schema.json'],
    rename: { json_schema: 'schema' },
    flags: { 'schema-file': Flags.string({ summary: 'A file holding the JSON Schema (instead of --schema).', exclusive: ['schema'] }) },
    body: ({ flags: f }) => (f['schema-file'] === undefined ? {} : { json_schema: parseJson(fs.readFileSync(f['schema-file'], 'utf8'), 'json_schema') }),
  }),
  'secret-type:get': api('secret_types_retrieve', { args: ['slug'], examples: ['secret-type get api-token --site shop_prod'] }),
  'secret-type:delete': api('secret_types_destroy', { args: ['slug'], examples: ['secret-type delete api-token --site shop_prod'] }),
};
