#!/usr/bin/env node
// The commands are TypeScript run by Node's type stripping (Node 24). The project installs its
// own Node 24 (the `node` dev dependency), which `npx platform` and `npm run` put first on the
// PATH; started by an older system Node directly, say so instead of failing obscurely.
if (Number(process.versions.node.split('.')[0]) < 24) {
  process.stderr.write(`platform needs Node 24 or later, not ${process.version}: run it as \`npx platform …\` (or \`npm run platform -- …\`), which uses the Node 24 the project installs.\n`);
  process.exit(1);
}
// V8's compile cache for the modules of every start (oclif, the commands): about a third of a
// short command's time. Kept in the project (not the shared temporary directory); when it cannot
// be written, Node runs without it.
const { enableCompileCache } = await import('node:module');
enableCompileCache?.(new URL('../node_modules/.cache/platform-compile', import.meta.url).pathname);
// MikroORM and TypeBox from the bundle `npm ci` made (cli/vendor.ts), when it is current.
if (process.env.PLATFORM_VENDOR !== '0') (await import('../cli/vendor.ts')).useVendorBundle();
const { execute } = await import('@oclif/core');

await execute({ dir: import.meta.url });
