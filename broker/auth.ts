// Who a connecting client is. Anonymous clients are devices named by their client id;
// credentials (AUTH_FILE) and mTLS identities come with the security work (issue 5).
import { deviceIdOfClientId } from '../bridge/contract.js';
import type { Identity } from './acl.js';

/** An anonymous client is a device whose id is its client id up to the first `.`. */
export function authenticateAnonymous(clientId: string): Identity | null {
  const deviceId = deviceIdOfClientId(clientId);
  return deviceId === null ? null : { role: 'device', deviceId };
}
