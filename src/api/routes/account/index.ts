import type { AccountPatch, Accounts } from '../../../accounts/accounts.ts';
import { authOf } from '../../context.ts';
import { parseBody } from '../../validate.ts';
import type { Route } from '../route.ts';
import { presentAccount } from './presenter.ts';
import { updateAccountBody } from './schema.ts';

export function accountRoutes(accounts: Accounts): Route[] {
  return [
    {
      operationId: 'getAccount',
      handler: async (ctx) => {
        ctx.body = presentAccount(await accounts.require(authOf(ctx).account.id));
      },
    },
    {
      operationId: 'updateAccount',
      handler: async (ctx) => {
        const body = parseBody(ctx, updateAccountBody);
        const patch: AccountPatch = {};
        if (body.name !== undefined) patch.name = body.name;
        if (body.website !== undefined) patch.website = body.website;
        if (body.about !== undefined) patch.about = body.about;
        if (body.track_opens !== undefined) patch.trackOpens = body.track_opens;
        if (body.track_clicks !== undefined) patch.trackClicks = body.track_clicks;
        if (body.reject_bad_recipients !== undefined) patch.rejectBadRecipients = body.reject_bad_recipients;
        if (body.reject_mistyped_recipients !== undefined) patch.rejectMistypedRecipients = body.reject_mistyped_recipients;
        if (body.message_metadata_retention !== undefined) patch.messageMetadataRetention = body.message_metadata_retention;
        if (body.message_data_retention !== undefined) patch.messageDataRetention = body.message_data_retention;
        ctx.body = presentAccount(await accounts.update(authOf(ctx).account.id, patch));
      },
    },
  ];
}
