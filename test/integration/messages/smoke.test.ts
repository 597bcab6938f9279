import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';

describe('messages: smoke', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  before(async () => {
    bed = await startMessageBed();
  });
  after(async () => bed?.stop());

  it('accepts a send and reads it back', async () => {
    const res = await bed.send({ attachments: [{ data: 'aGVsbG8=', base64: true, file_name: 'a.png', content_type: 'image/png', content_id: '<img1@x>' }], amp_content: '<html amp4email>x</html>' });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    console.log(JSON.stringify(res.body));
    const id = res.body.data[0].id;
    const got = await bed.api('GET', `${bed.messages}/${encodeURIComponent(id)}`);
    console.log(got.status, JSON.stringify(got.body, null, 1).slice(0, 3000));
    const list = await bed.api('GET', `${bed.messages}?status=Received`);
    console.log(list.status, JSON.stringify(list.body).slice(0, 500));
  });
});
