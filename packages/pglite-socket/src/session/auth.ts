/** How clients prove they know the password. */
export const AUTH_METHODS = ['scram-sha-256', 'md5', 'password'] as const
export type AuthMethod = (typeof AUTH_METHODS)[number]
