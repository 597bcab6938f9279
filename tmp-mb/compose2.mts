import { composeBody } from '../src/message/compose.ts';

/** A transactional-looking HTML body of exactly `bytes` bytes. */
function html(bytes: number): string {
  const head = '<!doctype html><html><head><meta charset="utf-8"><title>Your receipt</title>'
    + '<style>body{font-family:Arial,sans-serif;color:#222}table{border-collapse:collapse}td{padding:4px 8px}</style>'
    + '</head><body><h1>Thanks for your order</h1><p>Hello, here is your receipt.</p><table>';
  const tail = '</table><p>Questions? Reply to this email or visit <a href="https://example.com/help">our help centre</a>.</p></body></html>';
  let rows = '';
  for (let i = 1; head.length + rows.length + tail.length < bytes; i++) {
    rows += `<tr><td>Item ${i}</td><td>Widget model ${(i * 7919) % 1000}</td><td>$${(i * 3.17).toFixed(2)}</td></tr>`;
  }
  let out = head + rows + tail;
  if (out.length > bytes) out = head + rows.slice(0, rows.lastIndexOf('<tr>')) + tail;
  return out + ' '.repeat(bytes - out.length);
}

const HTML = html(5 * 1024);
const content = { from: { email: 'app@example.com', name: 'App' }, subject: 'Your receipt', html: HTML, attachments: [], headers: [], date: new Date() };
for (let r = 0; r < 5; r++) {
  const N = 4000; const t = process.hrtime.bigint(); const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) await composeBody(content as any, '0123456789abcdef');
  const c = process.cpuUsage(c0);
  console.log('compose', (Number(process.hrtime.bigint() - t) / 1000 / N).toFixed(1), 'µs wall', ((c.user + c.system) / N).toFixed(1), 'µs CPU');
}
