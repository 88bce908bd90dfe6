// Secrets that travel in URL paths never reach the log: the invitation token of the public
// routes (`/api/cloud/invitations/{token}/…`, also under `/sites/{schema}/`).
const INVITATION_TOKEN = /(\/invitations\/)(?!$)[^/]+(?=\/(details|accept)\/?$)/;

/** The path as it may be logged. */
export const redactPath = (path: string): string => path.replace(INVITATION_TOKEN, '$1[token]');
