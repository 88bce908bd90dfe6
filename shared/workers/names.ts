// A worker's default subdomain, in a module of its own: the CLI names the worker it deploys to
// as the service does, without loading the address rules (the TLD list) into every command.
import { slugify } from '../common/slug.ts';

/** The subdomain a worker gets from its name when none is given. */
export const subdomainFromName = (name: string): string => slugify(name, 63);
