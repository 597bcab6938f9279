import type { DomainsRepo } from '../store/domains-repo.ts';
import type { DomainRecord } from '../store/records.ts';
import type { DoctorReads, HeldListener } from './doctor-protocol.ts';

/** Every domain record of the store, by name: what the doctor checks, from the daemon or the store alike. */
export async function everyDomain(repo: DomainsRepo): Promise<DomainRecord[]> {
  const domains: DomainRecord[] = [];
  for await (const domain of repo.all()) domains.push(domain);
  return domains.sort((a, b) => a.name.localeCompare(b.name));
}

/** The running daemon's answers to the doctor: its store's domains, the sockets it holds now. */
export class DaemonDoctorReads implements DoctorReads {
  constructor(
    private readonly repo: DomainsRepo,
    private readonly held: () => HeldListener[],
  ) {}

  async listeners(): Promise<{ listeners: HeldListener[] }> {
    return { listeners: this.held() };
  }

  async domains(): Promise<{ domains: DomainRecord[] }> {
    return { domains: await everyDomain(this.repo) };
  }
}
