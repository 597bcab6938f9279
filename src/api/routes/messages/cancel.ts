import { satisfies, type Grants } from '../../../accounts/scopes.ts';
import type { Messages } from '../../../message/messages.ts';
import type { MessageRecord } from '../../../store/records.ts';
import { operation } from '../../operations.ts';

/**
 * The API's cancel, with the scope check of its operation: for a request to this node, and in a
 * cluster on the node holding a message that another node's request named (cluster/remote-messages.ts).
 */
export function cancelMessage(messages: Messages, accountId: string, ref: string, grants: Grants): Promise<MessageRecord> {
  return messages.cancel(
    accountId,
    ref,
    () => true,
    (domain) => satisfies(grants, operation('cancelMessage').security, domain),
  );
}
