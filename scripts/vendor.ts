// `npm run vendor`, also the `prepare` script that `npm ci` and `npm install` run: bundles the
// libraries every CLI command loads (cli/vendor.ts). A failure (esbuild not installed, say) is
// reported and is not an install failure: the CLI then loads those packages as installed.
import { VENDOR_DIR, buildVendorBundle } from '../cli/vendor.ts';

const started = performance.now();
try {
  const map = await buildVendorBundle();
  const took = Math.round(performance.now() - started);
  console.error(`platform: bundled ${Object.keys(map.versions).join(', ')} for the CLI into ${VENDOR_DIR} (${took} ms)`);
} catch (err) {
  console.error(`platform: the CLI's libraries were not bundled (${(err as Error).message}); commands load them as installed, slower.`);
}
