/** The shape of the statistics benchmark's data set (test/bench/stats-server.ts makes it, stats.ts queries it). */
export const END = Date.parse('2026-11-01T00:00:00Z');
export const DAYS = 90;
export const SENDERS = Array.from({ length: 50 }, (_, i) => `sender${i}.example.com`);
export const RECIPIENTS = Array.from({ length: 500 }, (_, i) =>
  i < 5 ? ['gmail.com', 'yahoo.com', 'outlook.com', 'icloud.com', 'gmx.de'][i]! : `rcpt${i}.example.net`,
);
export const TAGS = Array.from({ length: 20 }, (_, i) => `tag-${i}`);
