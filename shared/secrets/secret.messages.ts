// The exact success texts of the secret operations: one copy for the HTTP routes and the
// CLI's direct backend, so both modes answer word for word alike.
export const SECRET_MESSAGES = {
  created: 'Secret created.',
  updated: 'Secret updated.',
  deleted: 'Secret deleted.',
  typeCreated: 'Secret type created.',
  typeDeleted: 'Secret type deleted.',
} as const;
