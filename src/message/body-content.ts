import type { MailComposerAttachment } from 'nodemailer/lib/mail-composer';
import type { Address } from './headers.ts';

/** What a body is made of: everything but the per-message headers (To, Message-ID). */
export interface BodyContent {
  from: Address;
  to?: Address[];
  cc?: Address[];
  replyTo?: Address | undefined;
  subject: string;
  text?: string | undefined;
  html?: string | undefined;
  amp?: string | undefined;
  attachments: MailComposerAttachment[];
  headers: Array<[string, string]>;
  date: Date;
}
