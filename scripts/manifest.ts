// `npm run manifest`: writes oclif.manifest.json, the list of commands with their flags and
// help, so that `platform` starts without importing any command module (`--version`, help)
// and imports only cli/commands.ts to run one. cli/test/manifest.test.ts fails when the file is
// stale: run this after changing a command.
import fs from 'node:fs';
import path from 'node:path';
import { Plugin } from '@oclif/core';

const root = path.resolve(import.meta.dirname, '..');

/** The manifest as oclif computes it from the commands themselves. */
export async function buildManifest(): Promise<string> {
  const plugin = new Plugin({ root, ignoreManifest: true, errorOnManifestCreate: true, isRoot: true });
  await plugin.load();
  return `${JSON.stringify(plugin.manifest, null, 2)}\n`;
}

export const MANIFEST_FILE = path.join(root, 'oclif.manifest.json');

if (import.meta.main) {
  fs.writeFileSync(MANIFEST_FILE, await buildManifest());
  process.stdout.write(`wrote ${path.relative(process.cwd(), MANIFEST_FILE)}\n`);
}
