import { satisfies } from '../../../accounts/scopes.ts';
import type { Domains } from '../../../domains/domains.ts';
import type { DomainFilter, MessageReads, Messages } from '../../../message/messages.ts';
import type { Sender } from '../../../message/send.ts';
import type { MessageFilter } from '../../../store/messages-repo.ts';
import type { MessageStatus } from '../../../store/records.ts';
import { domainOf } from '../../../util/email.ts';
import { AppError, forbidden } from '../../../util/errors.ts';
import { authOf, type ApiContext } from '../../context.ts';
import { operation } from '../../operations.ts';
import { paginationInfo, parsePageQuery } from '../../pagination.ts';
import { parseBody, parseQuery } from '../../validate.ts';
import type { Route } from '../route.ts';
import type { MessagesElsewhere } from '../../../cluster/remote-messages.ts';
import { cancelMessage } from './cancel.ts';
import { presentMessage, presentOutcome, presentSummary } from './presenter.ts';
import { createConversationBody, createMessageBody, listMessagesQuery } from './schema.ts';

type SendBody = ReturnType<typeof createMessageBody.parse> | ReturnType<typeof createConversationBody.parse>;

/** The request fields both v2 send operations share, in the Sender's terms. */
function commonMail(body: SendBody) {
  return {
    source: 'api' as const,
    from: body.from,
    replyTo: body.reply_to,
    subject: body.subject,
    text: body.text_content,
    html: body.html_content,
    amp: body.amp_content,
    attachments: body.attachments,
    inlineRule: 'brackets' as const,
    badAddress: 'refuse' as const,
    headers: body.headers,
    tags: body.tags,
    sandbox: body.sandbox,
    sandboxResult: body.sandbox_result,
    tracking: body.tracking,
    retention: body.retention,
    schedule: body.schedule,
  };
}

/** `elsewhere`: cluster mode, where a cancel of a message this node does not hold goes; `reads`: what list and get answer from (in cluster mode the published records; else `messages`). */
export function messageRoutes(
  sender: Sender,
  messages: Messages,
  domains: Domains,
  elsewhere: MessagesElsewhere | null = null,
  reads: MessageReads = messages,
): Route[] {
  const maySend = (ctx: ApiContext) => (domain: string) => satisfies(authOf(ctx).grants, operation('createMessage').security, domain);

  /** The sender domains a key may read: all of them, or the ids of its domain scopes. */
  const readable = async (ctx: ApiContext): Promise<{ ids: string[] | null; filter: DomainFilter }> => {
    const auth = authOf(ctx);
    if (auth.grants.holdsAll('messages:read')) return { ids: null, filter: () => true };
    const found = await Promise.all(auth.grants.domainsFor('messages:read').map((name) => domains.find(auth.account.id, name)));
    const ids = found.filter((d) => d !== undefined).map((d) => d.id);
    return { ids, filter: (id) => ids.includes(id) };
  };

  return [
    {
      operationId: 'createMessage',
      handler: async (ctx) => {
        const body = parseBody(ctx, createMessageBody);
        const outcomes = await sender.send(
          authOf(ctx).account,
          {
            ...commonMail(body),
            audience: { kind: 'individual', recipients: body.recipients, substitutions: body.substitutions },
          },
          maySend(ctx),
          ctx.state.log,
        );
        ctx.status = 202;
        ctx.body = { object: 'list', data: outcomes.map(presentOutcome) };
      },
    },
    {
      operationId: 'createConversationMessage',
      handler: async (ctx) => {
        const body = parseBody(ctx, createConversationBody);
        const outcomes = await sender.send(
          authOf(ctx).account,
          {
            ...commonMail(body),
            audience: { kind: 'conversation', to: body.to, cc: body.cc, bcc: body.bcc },
          },
          maySend(ctx),
          ctx.state.log,
        );
        ctx.status = 202;
        ctx.body = { object: 'list', data: outcomes.map(presentOutcome) };
      },
    },
    {
      operationId: 'getMessages',
      handler: async (ctx) => {
        const query = parseQuery(ctx, listMessagesQuery);
        const page = parsePageQuery(ctx.query);
        const auth = authOf(ctx);
        const scope = await readable(ctx);
        const filter: MessageFilter = {};
        if (query.status?.length) filter.statuses = query.status as MessageStatus[];
        if (query.sender !== undefined) {
          const domain = await domains.find(auth.account.id, domainOf(query.sender));
          if (scope.ids && (!domain || !scope.ids.includes(domain.id))) throw forbidden('this API key may not read messages of that sender domain');
          filter.sender = query.sender;
        }
        if (query.recipient !== undefined) filter.recipient = query.recipient;
        if (query.subject !== undefined) filter.subject = query.subject;
        if (query.message_id_header !== undefined) filter.messageIdHeader = query.message_id_header;
        if (query.tags?.length) filter.tags = query.tags;
        if (query.from_time !== undefined) filter.fromMs = Date.parse(query.from_time);
        if (query.to_time !== undefined) filter.toMs = Date.parse(query.to_time);
        if (scope.ids) filter.domainIds = scope.ids;
        const result = await reads.list(auth.account.id, filter, page);
        ctx.body = { object: 'list', data: (await reads.shown(result.items)).map(presentSummary), pagination: paginationInfo(result) };
      },
    },
    {
      operationId: 'getMessage',
      handler: async (ctx) => {
        const message = await reads.get(authOf(ctx).account.id, ctx.params.message_id ?? '', (await readable(ctx)).filter);
        const [shown] = await reads.shown([message]);
        // Another node's message (cluster mode): its content stays there, and is left out as
        // the contract leaves out content that is not available; the header says where it is.
        const holder = reads.contentNode?.(message) ?? null;
        if (holder !== null) ctx.set('Postilion-Content-Node', holder);
        ctx.body = await presentMessage(shown!, await reads.content(message));
      },
    },
    {
      operationId: 'cancelMessage',
      handler: async (ctx) => {
        const auth = authOf(ctx);
        const ref = ctx.params.message_id ?? '';
        const message = await cancelMessage(messages, auth.account.id, ref, auth.grants).catch((err: unknown) => {
          // In a cluster, a message this node does not hold may be another node's: that node applies the cancel and answers.
          if (!elsewhere || !(err instanceof AppError && err.status === 404)) throw err;
          return elsewhere.cancel({ accountId: auth.account.id, ref, scopes: auth.key.scopes.map((s) => s.scope) });
        });
        ctx.body = { message: `message ${message.messageId} cancelled` };
      },
    },
  ];
}
