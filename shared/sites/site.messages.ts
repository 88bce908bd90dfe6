// The exact success texts of the site and domain operations: one copy, used by the HTTP
// routes and by the CLI's direct backend, so both modes answer word for word alike.
export const SITE_MESSAGES = {
  created: 'Site created successfully.',
  deleted: 'Site deleted successfully.',
} as const;

export const DOMAIN_MESSAGES = {
  created: 'Domain created successfully.',
  deleted: 'Domain deleted successfully.',
} as const;
