import { z } from 'zod';
import type { Accounts } from '../../../accounts/accounts.ts';
import type { ApiKeys } from '../../../accounts/api-keys.ts';
import type { Sender } from '../../../message/send.ts';
import { badRequest, forbidden } from '../../../util/errors.ts';
import type { ApiContext } from '../../context.ts';
import { identify } from '../../middleware/auth.ts';
import type { Handler } from '../route.ts';
import { absent, emptyAsAbsent, parseBody } from '../../validate.ts';

const contact = z.object({ email: z.string().max(254), name: absent(z.string()) });

/** The v1 body; v1 is in maintenance, so fields it never had are ignored rather than refused. */
export const v1SendBody = z.object({
  from: contact,
  recipients: z.array(contact).min(1, 'at least one recipient is required').max(100, 'at most 100 recipients per request'),
  content: z.object({
    subject: z.string().max(998),
    text_body: emptyAsAbsent(z.string()),
    html_body: emptyAsAbsent(z.string()),
    attachments: absent(
      z
        .array(
          z.object({
            data: z.string(),
            base64: absent(z.boolean()),
            content_type: z.string().min(1).max(255),
            content_id: absent(z.string().max(255)),
            file_name: z.string().min(1).max(255),
          }),
        )
        .max(100),
    ),
    headers: absent(z.record(z.string(), z.string())),
    reply_to: absent(contact),
  }),
});

/** v1 authentication: `X-Api-Key` holding a live v1 key (a v2 key is refused); 403 otherwise. */
export function v1Authenticate(apiKeys: ApiKeys, accounts: Accounts): Handler {
  return async (ctx, next) => {
    const refusal = await identify(apiKeys, accounts, ctx, ctx.get('x-api-key').trim(), 'v1');
    if (refusal === 'suspended') throw forbidden('account is suspended');
    if (refusal === 'deleted') throw forbidden('account has been deleted');
    if (refusal === 'ip') throw forbidden('client IP address is not allowed for this API key');
    if (refusal) throw forbidden('invalid credentials');
    await next();
  };
}

/** POST /v1/email/send: 201 with counts; recipients that could not be accepted are listed. */
export function v1Send(sender: Sender): Handler {
  return async (ctx: ApiContext) => {
    const type = ctx.get('content-type');
    if (type && !/^application\/json\b/i.test(type)) throw badRequest('only application/json is supported');
    const body = parseBody(ctx, v1SendBody);
    const auth = ctx.state.auth!;
    const outcomes = await sender.send(
      auth.account,
      {
        source: 'api-v1',
        from: body.from,
        replyTo: body.content.reply_to,
        subject: body.content.subject,
        text: body.content.text_body,
        html: body.content.html_body,
        attachments: body.content.attachments,
        inlineRule: 'any',
        badAddress: 'report',
        headers: body.content.headers,
        audience: { kind: 'individual', recipients: body.recipients },
      },
      (domain) => auth.grants.holds('messages:send:{domain}', domain),
      ctx.state.log,
    );
    const failed = outcomes.filter((o) => o.error !== null);
    ctx.status = 201;
    ctx.body = {
      success_count: outcomes.length - failed.length,
      fail_count: failed.length,
      failed_recipients: failed.map((o) => o.recipient.email),
      errors: failed.map((o) => `${o.recipient.email}: ${o.error}`),
    };
  };
}
