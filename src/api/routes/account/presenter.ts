import type { AccountRecord } from '../../../store/records.ts';

export function presentAccount(account: AccountRecord) {
  return {
    object: 'account' as const,
    id: account.id,
    parent_account_id: account.parentAccountId,
    created_at: account.createdAt,
    updated_at: account.updatedAt,
    name: account.name,
    website: account.website,
    about: account.about,
    track_opens: account.trackOpens,
    track_clicks: account.trackClicks,
    reject_bad_recipients: account.rejectBadRecipients,
    reject_mistyped_recipients: account.rejectMistypedRecipients,
    message_metadata_retention: account.messageMetadataRetention,
    message_data_retention: account.messageDataRetention,
    owner_id: account.ownerId,
  };
}
