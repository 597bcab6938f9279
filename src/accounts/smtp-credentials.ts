import { createHmac, randomBytes, randomInt, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { Page, PageRequest } from '../store/page.ts';
import type { DomainRecord, PasswordHashRecord, SmtpCredentialRecord } from '../store/records.ts';
import type { SmtpCredentialsRepo } from '../store/smtp-credentials-repo.ts';
import type { Store } from '../store/store.ts';
import { isValidDomain, normalizeDomain } from '../util/domain-name.ts';
import { badRequest, forbidden, notFound } from '../util/errors.ts';
import { newId, randomAlphanumeric } from '../util/ids.ts';
import { Lru } from '../util/lru.ts';
import { isPrintable } from '../util/text.ts';
import { iso, type Clock } from '../util/time.ts';

export const USERNAME_PREFIX = 'smtp-';
/** `smtp-` + 24 of [a-z0-9]: case-insensitive, and safe in every SMTP AUTH mechanism. */
export const USERNAME_PATTERN = /^smtp-[a-z0-9]{24}$/;
export const PASSWORD_LENGTH = 48;

/** scrypt cost: 50-100 ms and 16 MiB per verification here. Stored with each hash, so it can change. */
const SCRYPT = { n: 16384, r: 8, p: 1, keyLength: 32, saltBytes: 16 };
/** A verified username + password is trusted this long without running scrypt again. */
const VERIFIED_TTL_MS = 5 * 60 * 1000;
const VERIFIED_LIMIT = 10_000;
/** Longer usernames or passwords are wrong by construction: never hash megabytes. */
const MAX_INPUT = 1024;

export interface NewSmtpCredential {
  name: string;
  scope: 'global' | 'scoped';
  sandbox: boolean;
  /** Required (non-empty) for `scoped`; ignored for `global`. */
  domains: string[];
}

/**
 * A credential as SMTP AUTH hands it to a session: no password hash, and its associated domains
 * that still exist, by name (empty for a global credential, which may send from any domain).
 */
export type AuthenticatedCredential = Omit<SmtpCredentialRecord, 'password' | 'domains'> & { domains: string[] };

/**
 * Whether the caller may create a credential for `domain`, or (null) a global one. Absent for the
 * operator, who may create anything.
 */
export type MayCreate = (domain: string | null) => boolean;

/**
 * SMTP credentials: server-generated username and password (shown once; only an scrypt hash is
 * kept), global or scoped to domains of the account. Serves the API and the SMTP listener.
 */
export class SmtpCredentials {
  /** Recent successful logins: HMAC(username, password) → credential id, for VERIFIED_TTL_MS. */
  private readonly verified = new Lru<string, string>(VERIFIED_LIMIT, VERIFIED_TTL_MS, () => this.clock.now());
  /** Keys the verification cache, so it never holds anything a password could be guessed from. */
  private readonly cacheKey = randomBytes(32);
  /** Verified against on an unknown username, so that it costs as much as a wrong password. */
  private decoy: Promise<PasswordHashRecord> | null = null;

  constructor(
    private readonly store: Store,
    private readonly repo: SmtpCredentialsRepo,
    private readonly domains: DomainsRepo,
    private readonly clock: Clock,
  ) {}

  /** Creates a credential; the password is returned here and never again. */
  async create(accountId: string, input: NewSmtpCredential, may?: MayCreate): Promise<{ credential: SmtpCredentialRecord; password: string }> {
    const name = checkName(input.name);
    const names = input.scope === 'scoped' ? domainNames(input.domains) : [];
    if (may) {
      if (input.scope === 'global' && !may(null)) throw forbidden('creating a global SMTP credential needs smtp-credentials:write:all');
      const denied = names.find((d) => !may(d));
      if (denied !== undefined) throw forbidden(`this API key may not create SMTP credentials for ${denied}`);
    }
    const domains: SmtpCredentialRecord['domains'] = [];
    for (const domainName of names) {
      const domain = await this.domains.getByName(domainName);
      if (!domain || domain.accountId !== accountId) throw badRequest(`domain ${domainName} is not a domain of this account`);
      domains.push({ id: domain.id, name: domain.name });
    }
    const password = randomAlphanumeric(PASSWORD_LENGTH);
    const now = iso(this.clock.now());
    const credential: SmtpCredentialRecord = {
      v: 1,
      id: newId(),
      accountId,
      name,
      username: await this.freeUsername(),
      password: await hashPassword(password),
      sandbox: input.sandbox,
      scope: input.scope,
      domains,
      createdAt: now,
      updatedAt: now,
    };
    await this.store.commit(this.repo.create(credential));
    return { credential, password };
  }

  /** All of the account's credentials (`domainIds` null), or those of at least one of the domains. */
  list(accountId: string, domainIds: string[] | null, page: PageRequest): Promise<Page<SmtpCredentialRecord>> {
    return domainIds === null ? this.repo.list(accountId, page) : this.repo.listForDomains(accountId, domainIds, page);
  }

  /** The account's credential; another account's is not found, as an unknown one. */
  async get(accountId: string, id: string): Promise<SmtpCredentialRecord> {
    const credential = await this.repo.get(id);
    if (!credential || credential.accountId !== accountId) throw notFound('smtp credential not found');
    return credential;
  }

  /** Whether the credential still exists: a session asks before each message it relays. */
  async exists(id: string): Promise<boolean> {
    return (await this.repo.get(id)) !== undefined;
  }

  byUsername(username: string): Promise<SmtpCredentialRecord | undefined> {
    return this.repo.getByUsername(username.toLowerCase());
  }

  async delete(accountId: string, id: string): Promise<SmtpCredentialRecord> {
    const credential = await this.get(accountId, id);
    await this.store.commit(this.repo.delete(credential));
    this.forget(credential.id);
    return credential;
  }

  /**
   * The credential for an SMTP AUTH username and password, or null. An unknown username costs
   * the same scrypt run as a wrong password. The record is read on every call, so a deleted
   * credential stops working at once even while its login is remembered.
   */
  async authenticate(username: string, password: string): Promise<AuthenticatedCredential | null> {
    const credential = await this.verify(username, password);
    if (!credential) return null;
    const { password: _hash, domains: _refs, ...rest } = credential;
    return { ...rest, domains: await this.domainsOf(credential) };
  }

  private async verify(username: string, password: string): Promise<SmtpCredentialRecord | null> {
    this.decoy ??= hashPassword(randomAlphanumeric(PASSWORD_LENGTH));
    if (username.length > MAX_INPUT || password.length > MAX_INPUT) {
      await verifyPassword('', await this.decoy);
      return null;
    }
    const credential = await this.byUsername(username);
    const key = createHmac('sha256', this.cacheKey).update(username.toLowerCase()).update('\0').update(password).digest('base64');
    const remembered = this.verified.get(key);
    if (credential && remembered === credential.id) return credential;
    if (remembered !== undefined) this.verified.delete(key);
    const ok = await verifyPassword(password, credential?.password ?? (await this.decoy));
    if (!credential || !ok) return null;
    // Deleted while scrypt ran: do not remember a login for a credential that is gone.
    if (!(await this.exists(credential.id))) return null;
    this.verified.set(key, credential.id);
    return credential;
  }

  /**
   * The names of the credential's associated domains that still exist in its account. A
   * deleted domain drops out here (and a new domain of the same name has another id).
   */
  async domainsOf(credential: SmtpCredentialRecord): Promise<string[]> {
    const found = await Promise.all(credential.domains.map((d) => this.domains.get(d.id)));
    return found.filter((d): d is DomainRecord => d !== undefined && d.accountId === credential.accountId).map((d) => d.name);
  }

  /** A remembered login is only a shortcut past scrypt (the record is read anyway): drop it with the credential. */
  private forget(id: string): void {
    for (const [key, remembered] of this.verified) if (remembered === id) this.verified.delete(key);
  }

  /** A username no credential has: 24 random characters make a clash a formality, but check. */
  private async freeUsername(): Promise<string> {
    for (;;) {
      const username = USERNAME_PREFIX + randomLowerAlphanumeric(24);
      if (!(await this.repo.getByUsername(username))) return username;
    }
  }
}

const LOWER_ALPHANUMERIC = 'abcdefghijklmnopqrstuvwxyz0123456789';

function randomLowerAlphanumeric(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += LOWER_ALPHANUMERIC[randomInt(LOWER_ALPHANUMERIC.length)];
  return out;
}

function scryptAsync(password: string, salt: Buffer, keyLength: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(password, salt, keyLength, options, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string): Promise<PasswordHashRecord> {
  const salt = randomBytes(SCRYPT.saltBytes);
  const hash = await scryptAsync(password, salt, SCRYPT.keyLength, { N: SCRYPT.n, r: SCRYPT.r, p: SCRYPT.p });
  return { scheme: 'scrypt', n: SCRYPT.n, r: SCRYPT.r, p: SCRYPT.p, salt: salt.toString('base64'), hash: hash.toString('base64') };
}

export async function verifyPassword(password: string, stored: PasswordHashRecord): Promise<boolean> {
  const expected = Buffer.from(stored.hash, 'base64');
  const actual = await scryptAsync(password, Buffer.from(stored.salt, 'base64'), expected.length, { N: stored.n, r: stored.r, p: stored.p });
  return timingSafeEqual(actual, expected);
}

function checkName(text: string): string {
  const name = text.trim();
  if (name.length === 0 || name.length > 255) throw badRequest('name must be 1 to 255 characters');
  if (!isPrintable(name)) throw badRequest('name must not contain control characters');
  return name;
}

/** Normalised, valid and distinct; at least one. */
function domainNames(requested: string[]): string[] {
  const names = [...new Set(requested.map(normalizeDomain))];
  if (names.length === 0) throw badRequest('domains must name at least one domain for a scoped credential');
  const invalid = names.find((n) => !isValidDomain(n));
  if (invalid !== undefined) throw badRequest(`invalid domain name "${invalid}" in domains`);
  return names;
}
