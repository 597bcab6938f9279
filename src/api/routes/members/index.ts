import { z } from 'zod';
import type { Accounts } from '../../../accounts/accounts.ts';
import { MEMBER_ROLES, type MemberRecord } from '../../../store/records.ts';
import { authOf } from '../../context.ts';
import { parseBody, uuidParam } from '../../validate.ts';
import type { Route } from '../route.ts';

const addMemberBody = z.strictObject({
  email: z.email('email must be an email address').max(254),
  name: z.string().max(255).optional(),
  role: z.enum(MEMBER_ROLES),
});

export function presentMember(member: MemberRecord) {
  return {
    created_at: member.createdAt,
    updated_at: member.updatedAt,
    user_id: member.userId,
    account_id: member.accountId,
    role: member.role,
  };
}

export function memberRoutes(accounts: Accounts): Route[] {
  return [
    {
      operationId: 'getAccountMembers',
      handler: async (ctx) => {
        const members = await accounts.listMembers(authOf(ctx).account.id);
        ctx.body = { object: 'list', data: members.map(presentMember) };
      },
    },
    {
      operationId: 'addAccountMember',
      handler: async (ctx) => {
        const body = parseBody(ctx, addMemberBody);
        const member = await accounts.addMember(authOf(ctx).account.id, {
          email: body.email.toLowerCase(),
          role: body.role,
          ...(body.name !== undefined ? { name: body.name } : {}),
        });
        ctx.status = 201;
        ctx.body = presentMember(member);
      },
    },
    {
      operationId: 'removeAccountMember',
      handler: async (ctx) => {
        const userId = uuidParam(ctx, 'user_id');
        await accounts.removeMember(authOf(ctx).account.id, userId);
        ctx.body = { message: `member ${userId} removed` };
      },
    },
  ];
}
