// The success messages of the app and data source operations (the API and the CLI's direct mode).
export const APP_MESSAGES = {
  listed: 'Apps retrieved.',
  created: 'App created.',
  retrieved: 'App retrieved.',
  updated: 'App updated.',
  deleted: (slug: string) => `App "${slug}" deleted.`,
  restored: (slug: string) => `App "${slug}" restored.`,
  settingsRetrieved: 'Settings retrieved.',
  settingsUpdated: 'Settings updated.',
  dataSourcesListed: 'Data sources retrieved.',
  dataSourceCreated: 'Data source created.',
  dataSourceDeleted: (ref: string) => `Data source "${ref}" deleted.`,
} as const;
