// The app package's format (spec Part 2 §4 "Packages", §9; docs/app-packages.md): its modules in
// order with the export flag that includes each, the folders, the manifest and its integrity.
// One place for what export writes and import reads.
import { createHash } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { canonicalJson } from '../common/canonical.ts';

export const PACKAGE_FORMAT = 'app-package';
export const PACKAGE_VERSION = '1.0.0';
/** The platform version a package of this format needs at least (manifest `requires`). */
export const REQUIRED_PLATFORM_VERSION = '0.1.0';
export const SECRET_PLACEHOLDER = 'PLACEHOLDER - Update with actual value';
/** Module files of a bucket's ZIP: its metadata; each object under its original path. */
export const BUCKET_METADATA = 'bucket_metadata.json';

/** The export flags (all boolean) with their defaults, labels and help, in the order of the package. */
export const EXPORT_OPTIONS = [
  { key: 'include_app_roles', default: true, label: 'App roles', help_text: 'Roles by name, their hierarchy by parent_name; never their assignments to users.' },
  { key: 'include_datatables', default: true, label: 'Data tables', help_text: 'Data sources and table schemas (never records); cross-app reference tables are skipped.' },
  { key: 'include_functions', default: true, label: 'Functions', help_text: 'Code, runtime, timeout and environment (secret keys, never values).' },
  { key: 'include_events', default: true, label: 'Event subscriptions', help_text: 'Each by event and function_slug.' },
  { key: 'include_secrets', default: true, label: 'Secrets', help_text: `Keys, types and descriptions; every value replaced by "${SECRET_PLACEHOLDER}".` },
  { key: 'include_policies', default: true, label: 'Policies', help_text: 'Resource, role and derived-role policies in portable form; system and principal policies are not exported.' },
  { key: 'include_analytics', default: true, label: 'Analytics queries', help_text: 'Secrets referenced by the queries are included even without include_secrets.' },
  { key: 'include_storage', default: true, label: 'Storage', help_text: 'Buckets of the assets category with their files; attachments stay with the workspace.' },
  { key: 'include_frontend_workers', default: false, label: 'Frontend workers', help_text: 'Skipped by export and import even when true.' },
  { key: 'include_widgets', default: false, label: 'Widgets', help_text: 'Adds the widgets folder.' },
] as const;

export type OptionKey = (typeof EXPORT_OPTIONS)[number]['key'];
export type ExportFlags = Record<OptionKey, boolean>;

export const ExportOptionsBody = Type.Object(Object.fromEntries(EXPORT_OPTIONS.map((o) => [o.key, Type.Optional(Type.Boolean({ description: `${o.help_text} Default ${o.default}.` }))])), {
  additionalProperties: false,
});

/** The flags of an export: what the body says, the defaults for the rest. */
export const exportFlags = (body: Partial<ExportFlags>): ExportFlags => Object.fromEntries(EXPORT_OPTIONS.map((o) => [o.key, body[o.key] ?? o.default])) as ExportFlags;

/** The modules of a package in order: the folder, and the flag that includes it (none: always). */
export const MODULES = [
  { name: 'app', flag: undefined },
  { name: 'app_roles', flag: 'include_app_roles' },
  { name: 'datatables', flag: 'include_datatables' },
  { name: 'functions', flag: 'include_functions' },
  { name: 'events', flag: 'include_events' },
  { name: 'secrets', flag: 'include_secrets' },
  { name: 'policies', flag: 'include_policies' },
  { name: 'analytics', flag: 'include_analytics' },
  { name: 'tags', flag: undefined },
  { name: 'storage', flag: 'include_storage' },
  { name: 'frontend_workers', flag: 'include_frontend_workers' },
  { name: 'widgets', flag: 'include_widgets' },
] as const satisfies readonly { name: string; flag: OptionKey | undefined }[];

export type ModuleName = (typeof MODULES)[number]['name'];
/** Modules whose folder is read but never imported (the spec skips them): a warning, not a refusal. */
export const SKIPPED_MODULES: readonly ModuleName[] = ['frontend_workers', 'widgets'];

export const EXPORT_CONFIG = {
  order: EXPORT_OPTIONS.map((o) => o.key),
  options: EXPORT_OPTIONS.map((o) => ({ ...o })),
  always_included: ['app', 'tags'],
  notes: [
    'Not exported: domains and storage paths, data records (schemas only), cross-app reference tables, principal policies, role assignments, created-by and modified-by references, secret values.',
    `Secret values are replaced by "${SECRET_PLACEHOLDER}": set them after import.`,
    'Frontend workers are skipped by export and import even when include_frontend_workers is true.',
    'Storage exports only buckets of the assets category.',
  ],
};

/** One module in the manifest: its count, its files with their digests, and what the module adds. */
export interface ManifestModule {
  count: number;
  files: Record<string, string>;
  [extra: string]: unknown;
}

export interface Manifest {
  format: typeof PACKAGE_FORMAT;
  version: string;
  created_at: string;
  created_by: string | null;
  package: { app_slug: string; app_name: string; description: string };
  requires: { platform_version: string };
  modules: Partial<Record<ModuleName, ManifestModule>>;
  export_options: ExportFlags;
  integrity: { package_checksum: string; manifest_checksum: string };
}

export const sha256 = (data: Buffer | string): string => `sha256:${createHash('sha256').update(data).digest('hex')}`;

/** `sha256:<hex>` of a stream's bytes, read to the end. */
export async function streamDigest(stream: AsyncIterable<unknown>): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/** `package_checksum`: over every module file's path and digest, sorted by path, one `path digest` line each. */
export function packageChecksum(modules: Manifest['modules']): string {
  const lines = Object.values(modules)
    .flatMap((m) => Object.entries(m!.files))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, digest]) => `${path} ${digest}\n`);
  return sha256(lines.join(''));
}

/** `manifest_checksum`: over the manifest without `integrity`, as canonical JSON. */
export const manifestChecksum = (manifest: Omit<Manifest, 'integrity'> & { integrity?: unknown }): string => {
  const { integrity: _integrity, ...rest } = manifest;
  return sha256(canonicalJson(rest));
};
