// The exact success texts of the user operations: one copy, used by the HTTP routes and by
// the CLI's direct backend, so both modes answer word for word alike.
export const USER_MESSAGES = {
  created: 'User created successfully.',
  deleted: 'User deleted.',
  passwordChanged: 'Password changed successfully.',
} as const;
