import type { Security } from '../accounts/scopes.ts';

/**
 * Every v2 operation of the contract: its scope requirements (alternatives of joint role sets,
 * as the OpenAPI `security` entries), whether it takes an Idempotency-Key, and its rate class.
 * `family:{domain}` roles are checked first for "some domain", then by the handler for the
 * resource's domain.
 */
export interface Operation {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path below /v2, in router syntax; `/accounts/:account_id` prefixes account operations. */
  path: string;
  security: Security;
  idempotent?: boolean;
  /** Replays of this create carry a secret: stored encrypted, 5-minute window, 4xx not stored. */
  secretBearing?: boolean;
  /** The response holds a secret: its replay is stored encrypted, under the ordinary rules. */
  sealed?: boolean;
  rateClass?: 'general' | 'statistics';
}

const any = (family: string): Security => [[`${family}:all`], [`${family}:{domain}`]];
const one = (scope: string): Security => [[scope]];
const A = '/accounts/:account_id';

export const OPERATIONS = {
  ping: { method: 'GET', path: '/ping', security: [] },

  getAPIKeys: { method: 'GET', path: `${A}/api-keys`, security: one('api-keys:read') },
  createAPIKey: { method: 'POST', path: `${A}/api-keys`, security: one('api-keys:write'), idempotent: true, secretBearing: true },
  getAPIKey: { method: 'GET', path: `${A}/api-keys/:key_id`, security: one('api-keys:read') },
  updateAPIKey: { method: 'PUT', path: `${A}/api-keys/:key_id`, security: one('api-keys:write') },
  deleteAPIKey: { method: 'DELETE', path: `${A}/api-keys/:key_id`, security: one('api-keys:delete') },

  getDomains: { method: 'GET', path: `${A}/domains`, security: one('domains:read') },
  createDomain: { method: 'POST', path: `${A}/domains`, security: one('domains:write'), idempotent: true },
  getDomain: { method: 'GET', path: `${A}/domains/:domain`, security: one('domains:read') },
  updateDomain: { method: 'PUT', path: `${A}/domains/:domain`, security: one('domains:write') },
  deleteDomain: { method: 'DELETE', path: `${A}/domains/:domain`, security: any('domains:delete') },
  checkDomainDNS: { method: 'POST', path: `${A}/domains/:domain/check-dns`, security: one('domains:write') },

  getMessages: { method: 'GET', path: `${A}/messages`, security: any('messages:read') },
  createMessage: { method: 'POST', path: `${A}/messages`, security: any('messages:send'), idempotent: true },
  createConversationMessage: { method: 'POST', path: `${A}/messages/conversation`, security: any('messages:send'), idempotent: true },
  getMessage: { method: 'GET', path: `${A}/messages/:message_id`, security: any('messages:read') },
  cancelMessage: { method: 'DELETE', path: `${A}/messages/:message_id/cancel`, security: any('messages:cancel') },

  getAccount: { method: 'GET', path: A, security: one('accounts:read') },
  updateAccount: { method: 'PUT', path: A, security: one('accounts:write') },
  getAccountMembers: { method: 'GET', path: `${A}/members`, security: one('accounts:members:read') },
  addAccountMember: { method: 'POST', path: `${A}/members`, security: one('accounts:members:add'), idempotent: true },
  removeAccountMember: { method: 'DELETE', path: `${A}/members/:user_id`, security: one('accounts:members:remove') },

  listSubAccounts: { method: 'GET', path: `${A}/sub-accounts`, security: one('sub-accounts:read') },
  createSubAccount: { method: 'POST', path: `${A}/sub-accounts`, security: one('sub-accounts:write'), idempotent: true },
  getSubAccountsUsage: { method: 'GET', path: `${A}/sub-accounts/usage`, security: one('sub-accounts:usage') },
  getSubAccount: { method: 'GET', path: `${A}/sub-accounts/:sub_account_id`, security: one('sub-accounts:read') },
  updateSubAccount: { method: 'PUT', path: `${A}/sub-accounts/:sub_account_id`, security: one('sub-accounts:write') },
  deleteSubAccount: { method: 'DELETE', path: `${A}/sub-accounts/:sub_account_id`, security: one('sub-accounts:delete') },
  suspendSubAccount: { method: 'POST', path: `${A}/sub-accounts/:sub_account_id/suspend`, security: one('sub-accounts:suspend') },
  unsuspendSubAccount: { method: 'POST', path: `${A}/sub-accounts/:sub_account_id/unsuspend`, security: one('sub-accounts:suspend') },
  listSubAccountAPIKeys: { method: 'GET', path: `${A}/sub-accounts/:sub_account_id/api-keys`, security: one('sub-account-api-keys:read') },
  createSubAccountAPIKey: {
    method: 'POST',
    path: `${A}/sub-accounts/:sub_account_id/api-keys`,
    security: one('sub-account-api-keys:write'),
    idempotent: true,
    secretBearing: true,
  },
  getSubAccountAPIKey: { method: 'GET', path: `${A}/sub-accounts/:sub_account_id/api-keys/:key_id`, security: one('sub-account-api-keys:read') },
  updateSubAccountAPIKey: { method: 'PUT', path: `${A}/sub-accounts/:sub_account_id/api-keys/:key_id`, security: one('sub-account-api-keys:write') },
  deleteSubAccountAPIKey: { method: 'DELETE', path: `${A}/sub-accounts/:sub_account_id/api-keys/:key_id`, security: one('sub-account-api-keys:delete') },

  getSuppressions: { method: 'GET', path: `${A}/suppressions`, security: one('suppressions:read') },
  createSuppression: { method: 'POST', path: `${A}/suppressions`, security: one('suppressions:write'), idempotent: true },
  deleteSuppression: { method: 'DELETE', path: `${A}/suppressions`, security: one('suppressions:delete') },
  deleteAllSuppressions: { method: 'DELETE', path: `${A}/suppressions/all`, security: one('suppressions:wipe') },

  getRoutes: { method: 'GET', path: `${A}/routes`, security: any('routes:read') },
  createRoute: { method: 'POST', path: `${A}/routes`, security: any('routes:write'), idempotent: true, sealed: true },
  getRoute: { method: 'GET', path: `${A}/routes/:route_id`, security: any('routes:read') },
  updateRoute: { method: 'PUT', path: `${A}/routes/:route_id`, security: any('routes:write') },
  deleteRoute: { method: 'DELETE', path: `${A}/routes/:route_id`, security: any('routes:delete') },

  getWebhooks: { method: 'GET', path: `${A}/webhooks`, security: any('webhooks:read') },
  // The 201 carries the secret: its replay is stored encrypted, under the ordinary rules.
  createWebhook: { method: 'POST', path: `${A}/webhooks`, security: any('webhooks:write'), idempotent: true, sealed: true },
  getWebhook: { method: 'GET', path: `${A}/webhooks/:webhook_id`, security: any('webhooks:read') },
  updateWebhook: { method: 'PUT', path: `${A}/webhooks/:webhook_id`, security: any('webhooks:write') },
  deleteWebhook: { method: 'DELETE', path: `${A}/webhooks/:webhook_id`, security: any('webhooks:delete') },

  getSMTPCredentials: { method: 'GET', path: `${A}/smtp-credentials`, security: any('smtp-credentials:read') },
  createSMTPCredential: {
    method: 'POST',
    path: `${A}/smtp-credentials`,
    security: any('smtp-credentials:write'),
    idempotent: true,
    // The 201 carries the password: its replay is stored encrypted. The contract keeps the short
    // window and unstored 4xx for API-key creates only, so the ordinary rules apply otherwise.
    sealed: true,
  },
  getSMTPCredential: { method: 'GET', path: `${A}/smtp-credentials/:smtp_credential_id`, security: any('smtp-credentials:read') },
  deleteSMTPCredential: { method: 'DELETE', path: `${A}/smtp-credentials/:smtp_credential_id`, security: any('smtp-credentials:delete') },

  getDeliverabilityStatistics: {
    method: 'GET',
    path: `${A}/statistics/transactional/deliverability`,
    security: any('statistics-transactional:read'),
    rateClass: 'statistics',
  },
  getBounceStatistics: {
    method: 'GET',
    path: `${A}/statistics/transactional/bounce`,
    security: any('statistics-transactional:read'),
    rateClass: 'statistics',
  },
  getDeliveryTimeStatistics: {
    method: 'GET',
    path: `${A}/statistics/transactional/delivery-time`,
    security: any('statistics-transactional:read'),
    rateClass: 'statistics',
  },
} satisfies Record<string, Operation>;

export type OperationId = keyof typeof OPERATIONS;

export function operation(id: OperationId): Operation {
  return OPERATIONS[id];
}
