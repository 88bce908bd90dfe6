// The CLI's vendored libraries: MikroORM (with kysely) and TypeBox, which every direct-mode
// command loads, are about 650 small ES module files; Node resolves, reads and links each one
// (≈ 0.25 s of a 0.7 s command, the packages' own code a few milliseconds). `npm ci` (the
// `prepare` script: `npm run vendor`) bundles each of their entry points with esbuild into
// node_modules/.cache/platform-vendor, one file per entry point and shared chunks (each class
// exists once, whichever entry point a module imports it through); bin/run.js maps the bare
// specifiers to those files with a module resolve hook. Everything else the packages import
// (pg, the optional packages MikroORM looks for) stays external, resolved as installed from the
// bundle's own directory: hence its place inside node_modules.
//
// The map records the versions it was made from: a bundle of other versions, or of another list
// of packages, is not used (the packages load as installed, slower, never wrong) until
// `npm run vendor` (or the next `npm ci`/`npm install`) makes it again. The server and the tests
// load the packages as installed.
//
// A bundle lives in a directory named by what it is made from (the versions, the entry points,
// esbuild's version): making it again from the same install, as `npx platform` does (npm runs
// `prepare` when it links the project), finds it there and changes nothing, so a command that is
// loading its chunks at that moment never sees them go. A bundle of other versions is removed
// once the map names the new one (its packages' installed files are gone by then too).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { registerHooks } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** The packages bundled, with the subpaths their package.json exports and the CLI may import. */
const VENDORED: Record<string, string[]> = {
  kysely: ['', '/helpers/postgres', '/migration', '/readonly'],
  '@mikro-orm/core': ['', '/file-discovery', '/fs-utils', '/migrations', '/schema', '/dataloader'],
  '@mikro-orm/sql': [''],
  '@mikro-orm/postgresql': [''],
  '@mikro-orm/migrations': [''],
  '@sinclair/typebox': ['', '/compiler', '/errors', '/parser', '/syntax', '/system', '/type', '/value'],
};

const ROOT = path.resolve(import.meta.dirname, '..');
export const VENDOR_DIR = path.join(ROOT, 'node_modules/.cache/platform-vendor');
const MAP_FILE = 'map.json';

interface VendorMap {
  /** The version of each vendored package the bundle was made from. */
  versions: Record<string, string>;
  /** Specifier → bundle file (relative to VENDOR_DIR, inside the build's directory). */
  files: Record<string, string>;
}

/** The build's directory name: what the bundle is made from, so a build of the same install is found, not made again. */
const buildId = (versions: Record<string, string>, esbuildVersion: string): string =>
  createHash('sha256').update(JSON.stringify({ VENDORED, versions, esbuildVersion })).digest('hex').slice(0, 16);

const installedVersion = (name: string): string => (JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

/** The bundle's map when it was made from the installed versions of exactly the vendored packages; otherwise undefined. */
export function currentVendorMap(dir = VENDOR_DIR): VendorMap | undefined {
  let map: VendorMap;
  try {
    map = JSON.parse(fs.readFileSync(path.join(dir, MAP_FILE), 'utf8')) as VendorMap;
    const names = Object.keys(VENDORED);
    if (Object.keys(map.versions).sort().join() !== [...names].sort().join()) return undefined;
    if (names.some((name) => map.versions[name] !== installedVersion(name))) return undefined;
  } catch {
    return undefined;
  }
  return map;
}

/** Resolves the vendored specifiers to the bundle (bin/run.js); true when the bundle is current and in use. */
export function useVendorBundle(dir = VENDOR_DIR): boolean {
  const map = currentVendorMap(dir);
  if (!map) return false;
  const urls = new Map(Object.entries(map.files).map(([specifier, file]) => [specifier, pathToFileURL(path.join(dir, file)).href]));
  registerHooks({
    resolve(specifier, context, next) {
      const url = urls.get(specifier);
      return url ? { url, format: 'module', shortCircuit: true } : next(specifier, context);
    },
  });
  return true;
}

interface EsbuildOptions {
  [option: string]: unknown;
  plugins: { name: string; setup(build: { onResolve(options: { filter: RegExp }, resolve: (args: { path: string; kind: string }) => { path: string; external: boolean } | undefined): void }): void }[];
}

/**
 * Bundles the vendored packages into `dir`: a build directory named by what it is made from
 * (kept as it is when it is there already, made under a temporary name and renamed otherwise),
 * then the map, replaced by a rename; then other builds are removed.
 */
export async function buildVendorBundle(dir = VENDOR_DIR): Promise<VendorMap> {
  // Typed here, not from esbuild's declarations: they redeclare the global WebAssembly types
  // (for projects without the DOM library) and break the functions sandbox's.
  const { build, version: esbuildVersion } = (await import('esbuild' as string)) as { build: (options: EsbuildOptions) => Promise<unknown>; version: string };
  const names = Object.keys(VENDORED);
  const entries = Object.entries(VENDORED).flatMap(([name, subpaths]) =>
    subpaths.map((subpath) => ({ in: `${name}${subpath}`, out: `${name}${subpath}`.replace(/[@/]/g, (c) => (c === '/' ? '__' : '')) })),
  );
  const versions = Object.fromEntries(names.map((name) => [name, installedVersion(name)]));
  const id = buildId(versions, esbuildVersion);
  const map: VendorMap = { versions, files: Object.fromEntries(entries.map((e) => [e.in, `${id}/${e.out}.mjs`])) };
  fs.mkdirSync(dir, { recursive: true });
  const target = path.join(dir, id);
  if (!Object.values(map.files).every((file) => fs.existsSync(path.join(dir, file)))) {
    const staging = `${target}.tmp-${process.pid}`;
    fs.rmSync(staging, { recursive: true, force: true });
    fs.rmSync(target, { recursive: true, force: true }); // incomplete: no command can be using it
    await build({
      absWorkingDir: ROOT,
      entryPoints: entries,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node24',
      outdir: staging,
      outExtension: { '.js': '.mjs' },
      chunkNames: 'chunks/[name]-[hash]',
      logLevel: 'warning',
      plugins: [
        {
          name: 'only-vendored',
          setup(b) {
            // A bare specifier of another package stays an import, resolved as installed at run time.
            b.onResolve({ filter: /^[^./]/ }, (args) => {
              if (args.kind === 'entry-point') return undefined;
              const name = args.path.startsWith('@') ? args.path.split('/').slice(0, 2).join('/') : args.path.split('/')[0]!;
              return names.includes(name) ? undefined : { path: args.path, external: true };
            });
          },
        },
      ],
    });
    try {
      fs.renameSync(staging, target);
    } catch (err) {
      // Another install made the same build meanwhile: theirs is used.
      fs.rmSync(staging, { recursive: true, force: true });
      if (!fs.existsSync(target)) throw err;
    }
  }
  const mapTemp = path.join(dir, `${MAP_FILE}.tmp-${process.pid}`);
  fs.writeFileSync(mapTemp, `${JSON.stringify(map, null, 2)}\n`);
  fs.renameSync(mapTemp, path.join(dir, MAP_FILE));
  for (const entry of fs.readdirSync(dir)) {
    if (entry !== id && entry !== MAP_FILE && !entry.includes('.tmp-')) fs.rmSync(path.join(dir, entry), { recursive: true, force: true });
  }
  return map;
}
