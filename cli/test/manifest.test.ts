// oclif.manifest.json lets `platform` start without importing its commands; a stale one would
// hide a command or a flag. It must be exactly what the commands say now (`npm run manifest`).
import fs from 'node:fs';
import test from 'ava';
import { buildManifest, MANIFEST_FILE } from '../../scripts/manifest.ts';

test('oclif.manifest.json is current (run `npm run manifest` after changing a command)', async (t) => {
  t.is(fs.readFileSync(MANIFEST_FILE, 'utf8'), await buildManifest());
});
