/** How a data source stores its tables (a module of its own: the CLI imports it without the schemas). */
export const PROVIDER_TYPES = ['flat_table', 'jsonb', 'docstore'] as const;
