/**
 * The header block of an inbound message with the arrival checks' fields on top (RFC 5321
 * §4.4: trace fields are prepended) and without any `Authentication-Results` that claims our
 * authserv-id: a sender's forgery of our verdict must not reach a route (RFC 8601 §5).
 */
export function withTraceFields(head: Buffer, trace: string, authservId: string): Buffer {
  const text = head.toString('latin1');
  const forged = new RegExp(`^Authentication-Results:[ \\t]*(?:\\r?\\n[ \\t]+)*${escape(authservId)}[ \\t]*(?:;|\\r?\\n|$)`, 'i');
  if (!/^Authentication-Results:/im.test(text)) return Buffer.concat([Buffer.from(trace, 'latin1'), head]);
  const fields = text.split(/(?<=\n)(?=[^ \t])/);
  const kept = fields.filter((field) => !forged.test(field));
  return Buffer.from(trace + kept.join(''), 'latin1');
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
