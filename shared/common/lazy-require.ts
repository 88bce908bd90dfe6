// CommonJS packages that only some requests or commands use, loaded by their first use rather
// than with the module that needs them: a CLI command that never signs a token or types a file
// never reads jsonwebtoken or mime-db. Synchronous (require), so call sites stay as they are.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The package `specifier`, required on the first call of the returned function. */
export function lazyRequire<T>(specifier: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(specifier) as T);
}
