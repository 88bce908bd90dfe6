import fs from 'node:fs';
import { Flags } from '@oclif/core';
import type { SecretTypeCreate } from '../../../shared/secrets/secret-type.schemas.ts';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { parseJson, siteFlag } from '../../secrets.ts';

export default class SecretTypeCreateCommand extends BackendCommand<typeof SecretTypeCreateCommand> {
  static override summary = 'Create a secret type: a name and the JSON Schema its values must satisfy.';
  static override examples = [
    '<%= config.bin %> secret-type create --site shop_prod --name "API token" --schema \'{"type":"string","minLength":20}\'',
    '<%= config.bin %> secret-type create --site shop_prod --name "DB credentials" --schema-file db.schema.json',
  ];
  static override flags = {
    site: siteFlag,
    name: Flags.string({ summary: 'The name (the slug is made from it).', required: true }),
    slug: Flags.string({ summary: 'The slug, instead of one made from the name.' }),
    description: Flags.string({ summary: 'What the type is for.' }),
    schema: Flags.string({ summary: 'The JSON Schema, as JSON text (default {}: any value).', exclusive: ['schema-file'] }),
    'schema-file': Flags.string({ summary: 'A file holding the JSON Schema.' }),
  };

  async run() {
    const f = this.flags;
    const input: SecretTypeCreate = { name: f.name };
    if (f.slug !== undefined) input.slug = f.slug;
    if (f.description !== undefined) input.description = f.description;
    const schemaText = f['schema-file'] !== undefined ? fs.readFileSync(f['schema-file'], 'utf8') : f.schema;
    if (schemaText !== undefined) input.json_schema = parseJson(schemaText, 'json_schema') as Record<string, unknown>;
    const body = await (await this.backend()).createSecretType(f.site, input);
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}
