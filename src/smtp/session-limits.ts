/** Open sessions per client address: one address must not hold every slot of a listener. */
export class PerAddressLimit {
  private readonly open = new Map<string, number>();

  constructor(private readonly max: number) {}

  /** Counts a new session of `address`; false (nothing counted) when it already has `max`. */
  take(address: string): boolean {
    const open = this.open.get(address) ?? 0;
    if (open >= this.max) return false;
    this.open.set(address, open + 1);
    return true;
  }

  /** A counted session of `address` ended. */
  release(address: string): void {
    const open = (this.open.get(address) ?? 1) - 1;
    if (open > 0) this.open.set(address, open);
    else this.open.delete(address);
  }

  count(address: string): number {
    return this.open.get(address) ?? 0;
  }
}

/** An error smtp-server answers with `code` and `text`. */
export function reply(code: number, text: string): Error {
  return Object.assign(new Error(text), { responseCode: code });
}

/** Client-supplied text for a reply or a log line: visible ASCII only, bounded. */
export function printable(text: string, max = 80): string {
  return text.replace(/[^\x20-\x7e]/g, '?').slice(0, max);
}
