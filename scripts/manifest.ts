// `npm run manifest`: writes the two files the CLI starts from, both generated, never edited:
// - oclif.manifest.json, the list of commands with their flags and help, so that `platform`
//   starts without importing any command module (`--version`, help) and imports only
//   cli/commands.ts to run one;
// - operations.json, every API operation as the route registry declares it (method, path,
//   summary, and its path, query and body fields with their kind and description): the CLI's
//   commands take their flags, help and requests from it (cli/base.ts `api()`), so a route is
//   described once, in server/routes/.
// cli/test/manifest.test.ts fails when either file is stale: run this after changing a route or a command.
import fs from 'node:fs';
import path from 'node:path';
import { Plugin } from '@oclif/core';
import type { TSchema } from '@sinclair/typebox';

const root = path.resolve(import.meta.dirname, '..');

/** The manifest as oclif computes it from the commands themselves. */
export async function buildManifest(): Promise<string> {
  const plugin = new Plugin({ root, ignoreManifest: true, errorOnManifestCreate: true, isRoot: true });
  await plugin.load();
  return `${JSON.stringify(plugin.manifest, null, 2)}\n`;
}

export const MANIFEST_FILE = path.join(root, 'oclif.manifest.json');
export const OPERATIONS_FILE = path.join(root, 'operations.json');

/** How a field's value is written on the command line (cli/base.ts turns it into the request's value). */
type Kind = 'string' | 'number' | 'boolean' | 'strings' | 'numbers' | 'object' | 'json';

function kindOf(schema: TSchema): Kind {
  const variants = ((schema.anyOf ?? schema.oneOf ?? [schema]) as TSchema[]).filter((v) => v.type !== 'null');
  const types = new Set(variants.map((v) => (v.type === 'integer' ? 'number' : v.type === 'array' ? `array:${kindOf(v.items as TSchema)}` : v.type)));
  if (types.size !== 1) return 'json';
  const [type] = types;
  if (type === 'string' || type === 'number' || type === 'boolean' || type === 'object') return type;
  if (type === 'array:string') return 'strings';
  if (type === 'array:number') return 'numbers';
  return 'json';
}

function helpOf(schema: TSchema): string | undefined {
  const variants = (schema.anyOf as TSchema[] | undefined) ?? [];
  const values = schema.enum ?? (variants.length && variants.every((v) => v.const !== undefined) ? variants.map((v) => v.const) : undefined);
  const choices = values?.length ? `One of: ${values.join(', ')}.` : undefined;
  const description = schema.description?.replace(/(?<![.:!?])$/, '.');
  return [description, choices].filter(Boolean).join(' ') || undefined;
}

/** The fields of an object schema (its read-only ones left out: no client sends them). */
function fields(schema: TSchema | undefined, post: boolean) {
  if (!schema?.properties) return undefined;
  const required = new Set<string>(post ? (schema.required ?? []) : []);
  const out: Record<string, { kind: Kind; help?: string; required?: true }> = {};
  for (const [name, prop] of Object.entries(schema.properties as Record<string, TSchema>)) {
    if (prop.readOnly) continue;
    out[name] = { kind: kindOf(prop), help: helpOf(prop), ...(required.has(name) ? { required: true as const } : {}) };
  }
  return out;
}

/** Every operation of the route registry, by operationId. */
export async function buildOperations(): Promise<string> {
  const { buildRegistry } = await import('../server/app.ts');
  const { loadConfig } = await import('../shared/config.ts');
  const config = loadConfig({ PLATFORM_SECRET_KEY: 'x'.repeat(32), DATABASE_URL: 'postgres://localhost/manifest' });
  const unused = {} as never;
  const registry = buildRegistry({ config, tokens: unused, mailer: unused, log: unused, store: unused, secrets: unused, functions: { events: unused } as never });
  const operations: Record<string, unknown> = {};
  for (const def of registry.routes) {
    const description = [def.description, def.body?.description].filter(Boolean).join(' ');
    operations[def.operationId] = {
      method: def.method.toUpperCase(),
      path: def.path,
      ...(def.scope === 'tenant' ? { site: true } : {}),
      summary: def.summary,
      ...(description ? { description } : {}),
      params: fields(def.params, false),
      query: fields(def.query, false),
      body: fields(def.body, def.method === 'post'),
    };
  }
  return `${JSON.stringify(operations, null, 1)}\n`;
}

if (import.meta.main) {
  fs.writeFileSync(OPERATIONS_FILE, await buildOperations());
  fs.writeFileSync(MANIFEST_FILE, await buildManifest());
  process.stdout.write(`wrote ${path.relative(process.cwd(), OPERATIONS_FILE)} and ${path.relative(process.cwd(), MANIFEST_FILE)}\n`);
}
