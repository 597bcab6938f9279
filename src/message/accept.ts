import { messageEventData } from '../events/message-data.ts';
import type { EventRecorder } from '../events/recorder.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { AccountRecord, DomainRecord, MessageRecord, SandboxResult } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { iso, type Clock } from '../util/time.ts';
import type { Emitter } from '../util/signals.ts';
import { retentionTimes } from './retention.ts';

export interface StoredBody {
  id: string;
  chunks: Buffer[];
  /**
   * Chunks of a large body already written while it was received (at indices 1 to `spooled`):
   * `chunks[0]` is its first chunk (the header block) and the others follow the spooled ones.
   */
  spooled?: number | undefined;
}

/** Counts an account's receptions before they are committed; throws (403) past its cap. Returns the undo. */
export interface Quota {
  reserve(account: AccountRecord, n: number): Promise<() => void>;
}

/** One recipient's message: its header block and the body it shares. */
export interface NewMessage {
  id: string;
  messageId: string;
  recipient: string;
  head: string;
  bodyId: string;
  subject: string;
  /** Tracked mail: the links its click tokens number (stored apart, see MessagesRepo.putLinks). */
  links?: string[] | undefined;
}

/** Everything accept() needs: validated, authorised, composed. API and SMTP build this. */
export interface Submission {
  account: AccountRecord;
  domain: DomainRecord;
  source: MessageRecord['source'];
  sender: string;
  tags: string[];
  sandbox: SandboxResult | null;
  /** Per-message overrides; null/absent fields take the account defaults. */
  tracking?: { open?: boolean | null | undefined; click?: boolean | null | undefined } | undefined;
  retention?: { metadata?: number | null | undefined; data?: number | null | undefined } | undefined;
  /** Absolute times in ms, already checked against the limits. */
  schedule?: { firstAttempt?: number | undefined; expires?: number | undefined } | undefined;
  bodies: StoredBody[];
  messages: NewMessage[];
  /** A DSN of ours: sent with a null return path, and never reported on by another DSN. */
  bounceNotification?: boolean;
}

/** What the Acceptor tells of every durably committed batch: the records and the bodies stored with them. */
export interface AcceptSignals {
  'messages.accepted': { records: MessageRecord[]; bodies: readonly StoredBody[] };
}

/**
 * The one way a message enters Postilion. Records, bodies, body references, index entries,
 * due-time entries and `message.reception` events go into ONE batch, committed with sync
 * (group-committed with concurrent accepts); the promise resolves only once it is on disk.
 */
export class Acceptor {
  constructor(
    private readonly store: Store,
    private readonly repo: MessagesRepo,
    private readonly events: EventRecorder,
    private readonly clock: Clock,
    private readonly signals: Emitter<AcceptSignals>,
    /** A sub account's monthly credit (accounts/usage.ts): counts receptions, refuses a send past it. */
    private readonly quota?: Quota,
  ) {}

  async accept(submission: Submission): Promise<MessageRecord[]> {
    const { records, ops } = this.prepare(submission);
    // Receptions as the statistics count them: sandbox mail and our own DSNs are not.
    const counted = submission.sandbox === null && !submission.bounceNotification ? records.length : 0;
    const undo = this.quota && counted > 0 ? await this.quota.reserve(submission.account, counted) : null;
    try {
      await this.store.commit(ops);
    } catch (err) {
      undo?.();
      throw err;
    }
    this.announce(records, submission.bodies);
    return records;
  }

  /**
   * The records and write ops of a submission, for a caller that commits them in a batch of its
   * own (a DSN goes out in the same batch as the bounce it reports) and then calls announce().
   */
  prepare(submission: Submission): { records: MessageRecord[]; ops: WriteOp[] } {
    const records = submission.messages.map((m) => this.record(submission, m));
    const ops: WriteOp[] = [];
    for (const body of submission.bodies) ops.push(...this.repo.putBody(body.id, body.chunks, body.spooled ?? 0));
    for (const [i, record] of records.entries()) {
      const links = submission.messages[i]!.links;
      if (links) ops.push(...this.repo.putLinks(record.id, links));
      ops.push(
        ...this.repo.put(record),
        ...this.repo.refBody(record.bodyId, record.id),
        ...this.repo.schedule(record),
        ...this.events.record({ type: 'message.reception', accountId: record.accountId, data: messageEventData(record, 'on_reception') }, { message: record }),
      );
    }
    return { records, ops };
  }

  /** Tells of durably committed records (and the bodies stored with them): the engine learns of new due work this way. */
  announce(records: MessageRecord[], bodies: readonly StoredBody[] = []): void {
    this.signals.emit('messages.accepted', { records, bodies });
  }

  private record(s: Submission, m: NewMessage): MessageRecord {
    const now = this.clock.now();
    const retention = {
      metadataDays: s.retention?.metadata ?? s.account.messageMetadataRetention,
      dataDays: s.retention?.data ?? s.account.messageDataRetention,
    };
    const times = retentionTimes(now, retention);
    const firstAttempt = s.schedule?.firstAttempt;
    const expires = s.schedule?.expires;
    const createdAt = iso(now);
    return {
      v: 1,
      id: m.id,
      accountId: s.account.id,
      domainId: s.domain.id,
      domain: s.domain.name,
      messageId: m.messageId,
      direction: 'outbound',
      source: s.source,
      sender: s.sender,
      recipient: m.recipient,
      subject: m.subject,
      tags: s.tags,
      status: 'Received',
      sandbox: s.sandbox,
      tracking: { open: s.tracking?.open ?? s.account.trackOpens, click: s.tracking?.click ?? s.account.trackClicks },
      retention,
      schedule:
        s.schedule && (firstAttempt !== undefined || expires !== undefined)
          ? { firstAttempt: firstAttempt !== undefined ? iso(firstAttempt) : null, expires: expires !== undefined ? iso(expires) : null }
          : null,
      dueAt: firstAttempt !== undefined ? iso(firstAttempt) : createdAt,
      bodyId: m.bodyId,
      head: m.head,
      contentPurged: false,
      createdAt,
      updatedAt: createdAt,
      sentAt: null,
      deliveredAt: null,
      retainUntil: iso(times.retainUntil),
      dataRetainUntil: iso(times.dataRetainUntil),
      attempts: [],
      openCount: 0,
      clickCount: 0,
      bounceClassification: '',
      isBounceNotification: s.bounceNotification ?? false,
      referenceMessageId: null,
    };
  }
}
