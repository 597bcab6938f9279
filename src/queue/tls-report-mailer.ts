import { buildReportMail } from '../delivery/tls-reports/report.ts';
import type { ReportMailer } from '../delivery/tls-reports/tls-reports.ts';
import type { Acceptor } from '../message/accept.ts';
import { newMessageId } from '../message/message-id.ts';
import type { AccountsRepo } from '../store/accounts-repo.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import { BODY_CHUNK_BYTES } from '../store/messages-repo.ts';
import type { Clock } from '../util/time.ts';
import { splitHead } from './dsn-sender.ts';

/**
 * Sends TLS reports by mail (RFC 8460 §5.3) as DSNs go: accepted as a message of the `from`
 * address's domain, which must be a domain of this server (so the report is DKIM-signed with
 * its key), with a null return path: a report that cannot be delivered bounces to no one.
 */
export class TlsReportMailer implements ReportMailer {
  readonly submitter: string;

  constructor(
    private readonly domains: DomainsRepo,
    private readonly accounts: AccountsRepo,
    private readonly acceptor: Acceptor,
    private readonly clock: Clock,
    private readonly from: string,
  ) {
    this.submitter = from.slice(from.lastIndexOf('@') + 1).toLowerCase();
  }

  async send(mail: { to: string; policyDomain: string; day: string; reportId: string; fileName: string; gzipped: Buffer }): Promise<void> {
    const domain = await this.domains.getByName(this.submitter);
    if (!domain) throw new Error(`tls_reporting.from: ${this.submitter} is not a domain of this server (postilion domains add)`);
    const account = await this.accounts.getAccount(domain.accountId);
    if (!account) throw new Error(`tls_reporting.from: the account of ${this.submitter} is gone`);
    const now = this.clock.now();
    const { id, header } = newMessageId(domain.name, now);
    const text = buildReportMail({
      from: this.from,
      to: mail.to,
      submitter: this.submitter,
      policyDomain: mail.policyDomain,
      reportId: mail.reportId,
      messageId: header,
      date: new Date(now),
      boundary: `=_tlsrpt_${id.replace(/-/g, '')}`,
      fileName: mail.fileName,
      gzipped: mail.gzipped,
      day: mail.day,
    });
    const [head, body] = splitHead(text);
    const bytes = Buffer.from(body, 'utf8');
    const chunks: Buffer[] = [];
    for (let at = 0; at < bytes.length; at += BODY_CHUNK_BYTES) chunks.push(bytes.subarray(at, at + BODY_CHUNK_BYTES));
    const bodyId = `tlsrpt-${id}`;
    await this.acceptor.accept({
      account,
      domain,
      source: 'tlsrpt',
      sender: this.from,
      tags: [],
      sandbox: null,
      tracking: { open: false, click: false },
      bodies: [{ id: bodyId, chunks }],
      messages: [{ id, messageId: header, recipient: mail.to, head, bodyId, subject: `Report Domain: ${mail.policyDomain}` }],
      bounceNotification: true,
    });
  }
}
