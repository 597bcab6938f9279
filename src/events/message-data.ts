import type { MessageRecord } from '../store/records.ts';
import type { DeliveryAttemptData, MessageEventData, MessageEventName } from './types.ts';

/** The data of a message event, in the reference producer's field order (reference-api §5.2). */
export function messageEventData(m: MessageRecord, event: MessageEventName, attempt?: DeliveryAttemptData): MessageEventData {
  return {
    account_id: m.accountId,
    event,
    from: m.sender,
    recipient: m.recipient,
    subject: m.subject,
    message_id_header: m.messageId,
    is_bot: false,
    id: m.id,
    ...(attempt ? { delivery_attempt: attempt } : {}),
  };
}
