import type { EventRecorder } from '../events/recorder.ts';
import type { Messages } from '../message/messages.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { DomainRecord, MessageRecord } from '../store/records.ts';
import { StoreClosedError } from '../store/store.ts';
import { iso, type Clock } from '../util/time.ts';
import { botReason } from './bots.ts';

/** Who opened or clicked: the client address (by the trusted-proxy rules) and its user agent. */
export interface Client {
  ip: string;
  userAgent: string;
}

/** Hits waiting to be recorded at most; past it, a request waits for its own to be written. */
const MAX_PENDING = 10_000;
/** A user agent is kept to this many characters in events. */
const MAX_USER_AGENT = 512;
/** Tracked messages whose facts (domain, tracking, links) are kept in memory at most, and for how long. */
const KNOWN_MAX = 20_000;
const KNOWN_MS = 10 * 60_000;

/** What a hit needs of its message, none of which changes once it is accepted. */
interface Known {
  domainId: string;
  open: boolean;
  click: boolean;
  links: readonly string[] | null | undefined;
  at: number;
}

/** The message a hit is for (its id), once it is known to be tracked that way. */
export interface TrackedMessage {
  id: string;
}

/**
 * Opens and clicks. A request is answered once its message and link are known; the hit itself
 * (the message's counts, `message.opened` / `message.clicked` with is_bot, the statistics) is
 * written in one batch under the message's lock right after, so that a redirect never waits for
 * a disk sync. A crash can lose hits answered in the last moments; never a message or its mail.
 */
export class TrackingHits {
  private pending = 0;
  private readonly idle: Array<() => void> = [];
  /**
   * Recently hit messages' facts, so that a redirect reads nothing from the store (a message
   * record is rewritten by every hit; reading it again each time cost more than the rest).
   * Bounded, and forgotten after KNOWN_MS: a message deleted since is seen again soon.
   */
  private readonly known = new Map<string, Known>();

  constructor(
    private readonly repo: MessagesRepo,
    private readonly messages: Messages,
    private readonly events: EventRecorder,
    private readonly clock: Clock,
    private readonly scannerMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** The tracked message of the domain, or null (unknown, another domain's, or not tracked that way). */
  async message(domain: DomainRecord, id: string, kind: 'open' | 'click'): Promise<TrackedMessage | null> {
    const known = await this.facts(id);
    if (!known || known.domainId !== domain.id) return null;
    return (kind === 'open' ? known.open : known.click) ? { id } : null;
  }

  /** The URL link `index` of a tracked message points at, or null. */
  async link(id: string, index: number): Promise<string | null> {
    const known = await this.facts(id);
    if (known && known.links === undefined) known.links = (await this.repo.links(id)) ?? null;
    return known?.links?.[index] ?? null;
  }

  private async facts(id: string): Promise<Known | null> {
    const now = this.clock.now();
    const cached = this.known.get(id);
    if (cached && now - cached.at < KNOWN_MS) return cached;
    const m = await this.repo.get(id);
    if (!m || m.direction !== 'outbound') {
      this.known.delete(id);
      return null;
    }
    const known: Known = { domainId: m.domainId, open: m.tracking.open, click: m.tracking.click, links: undefined, at: now };
    this.known.delete(id);
    this.known.set(id, known);
    if (this.known.size > KNOWN_MAX) this.known.delete(this.known.keys().next().value!);
    return known;
  }

  /** Records a hit; resolves at once unless too many are waiting to be written. */
  async hit(message: TrackedMessage, kind: 'open' | 'click', client: Client, url?: string): Promise<void> {
    const at = this.clock.now();
    this.pending += 1;
    const written = this.write(message.id, kind, client, url, at).catch((err) => {
      if (!(err instanceof StoreClosedError)) this.onError(err);
    }).finally(() => {
      this.pending -= 1;
      if (this.pending === 0) for (const done of this.idle.splice(0)) done();
    });
    if (this.pending > MAX_PENDING) await written;
  }

  /** Resolves once every hit taken so far is written (shutdown). */
  drain(): Promise<void> {
    return this.pending === 0 ? Promise.resolve() : new Promise((resolve) => this.idle.push(resolve));
  }

  private async write(id: string, kind: 'open' | 'click', client: Client, url: string | undefined, at: number): Promise<void> {
    const userAgent = client.userAgent.slice(0, MAX_USER_AGENT);
    await this.messages.update(id, (current) => {
      const deliveredAt = current.deliveredAt ? Date.parse(current.deliveredAt) : null;
      const isBot = botReason({ userAgent, ip: client.ip, deliveredAt, at }, this.scannerMs) !== null;
      const firstField = kind === 'open' ? 'firstOpenAt' : 'firstClickAt';
      const first = !isBot && !current[firstField];
      const next: MessageRecord = {
        ...current,
        ...(kind === 'open' ? { openCount: current.openCount + 1 } : { clickCount: current.clickCount + 1 }),
        ...(first ? { [firstField]: iso(at) } : {}),
      };
      // Field order as in the contract's examples (webhooks.yaml).
      const extra = kind === 'open'
        ? this.events.record({
            type: 'message.opened',
            accountId: next.accountId,
            data: {
              account_id: next.accountId, event: 'on_opened', from: next.sender, recipient: next.recipient, subject: next.subject,
              message_id_header: next.messageId, id: next.id, user_agent: userAgent, ip: client.ip, is_bot: isBot,
            },
          }, { message: next, first })
        : this.events.record({
            type: 'message.clicked',
            accountId: next.accountId,
            data: {
              account_id: next.accountId, event: 'on_clicked', from: next.sender, recipient: next.recipient, subject: next.subject,
              message_id_header: next.messageId, id: next.id, url: url ?? '', user_agent: userAgent, ip: client.ip, is_bot: isBot,
            },
          }, { message: next, first });
      return { next, extra };
    });
  }
}
