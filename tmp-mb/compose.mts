import { composeBody } from '../src/message/compose.ts';
const html = ('<p>Hello {{name}}, this is a line of html content for the benchmark.</p>\n').repeat(70).slice(0, 5120);
const content = { from: { email: 'app@example.com', name: 'App' }, subject: 'Hello there', html, attachments: [], headers: [], date: new Date() };
for (let r = 0; r < 4; r++) {
  const N = 5000; const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await composeBody(content as any);
  console.log('compose', (Number(process.hrtime.bigint() - t) / 1000 / N).toFixed(1), 'µs');
}
const out = await composeBody(content as any); console.log(Buffer.concat(out.chunks).toString().slice(0, 600));
