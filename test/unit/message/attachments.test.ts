import { expect } from 'chai';
import { attachmentsFor, type AttachmentInput } from '../../../src/message/compose.ts';
import { appErrorOf } from '../../helpers/app-error.ts';

const base: AttachmentInput = { data: 'hello', file_name: 'a.txt', content_type: 'text/plain' };

describe('attachmentsFor', () => {
  it('gives no attachments for none', () => {
    expect(attachmentsFor(undefined, 'brackets')).to.deep.equal([]);
    expect(attachmentsFor([], 'any')).to.deep.equal([]);
  });

  it('keeps non-base64 data as text with its file name and type', () => {
    expect(attachmentsFor([base], 'brackets')).to.deep.equal([{ content: 'hello', filename: 'a.txt', contentType: 'text/plain' }]);
  });

  it('decodes base64 data to bytes', () => {
    const [out] = attachmentsFor([{ ...base, data: Buffer.from([0, 1, 254, 255]).toString('base64'), base64: true }], 'brackets');
    expect(Buffer.isBuffer(out!.content)).to.equal(true);
    expect([...(out!.content as Buffer)]).to.deep.equal([0, 1, 254, 255]);
  });

  it('accepts base64 folded over lines', () => {
    const [out] = attachmentsFor([{ ...base, data: 'aGVs\r\nbG8g\nd29y bGQ=', base64: true }], 'brackets');
    expect((out!.content as Buffer).toString()).to.equal('hello world');
  });

  for (const data of ['aGVsbG8', 'not base64!', 'aGVsbG8===', '=aGV', 'aGV-bG8_']) {
    it(`refuses ${JSON.stringify(data)} as base64, naming the attachment`, () => {
      expect(appErrorOf(() => attachmentsFor([base, { ...base, data, base64: true }], 'brackets'))).to.match(/attachments\[1\]\.data/);
    });
  }

  it('does not treat data as base64 when base64 is false', () => {
    expect(attachmentsFor([{ ...base, data: 'not base64!', base64: false }], 'brackets')[0]!.content).to.equal('not base64!');
  });

  describe('v2 rule (brackets)', () => {
    it('makes a <bracketed> content_id inline, with the brackets removed', () => {
      const [out] = attachmentsFor([{ ...base, content_id: '<logo@example.com>' }], 'brackets');
      expect(out).to.include({ cid: 'logo@example.com', contentDisposition: 'inline' });
    });

    it('keeps a content_id without brackets an ordinary attachment', () => {
      const [out] = attachmentsFor([{ ...base, content_id: 'logo@example.com' }], 'brackets');
      expect(out).to.not.have.property('cid');
      expect(out).to.not.have.property('contentDisposition');
    });

    it('does not take malformed brackets as inline', () => {
      for (const cid of ['<>', '<a b>', '<<a>>', '<a', 'a>']) {
        expect(attachmentsFor([{ ...base, content_id: cid }], 'brackets')[0], cid).to.not.have.property('cid');
      }
    });

    it('trims spaces around a bracketed content_id', () => {
      expect(attachmentsFor([{ ...base, content_id: '  <x@y>  ' }], 'brackets')[0]).to.include({ cid: 'x@y' });
    });
  });

  describe('v1 rule (any)', () => {
    it('makes any non-empty content_id inline', () => {
      expect(attachmentsFor([{ ...base, content_id: 'my-image' }], 'any')[0]).to.include({ cid: 'my-image', contentDisposition: 'inline' });
    });

    it('strips brackets from a bracketed content_id', () => {
      expect(attachmentsFor([{ ...base, content_id: '<my-image>' }], 'any')[0]).to.include({ cid: 'my-image' });
    });

    it('keeps an empty or blank content_id an ordinary attachment', () => {
      expect(attachmentsFor([{ ...base, content_id: '' }], 'any')[0]).to.not.have.property('cid');
      expect(attachmentsFor([{ ...base, content_id: '   ' }], 'any')[0]).to.not.have.property('cid');
    });
  });

  it('honours an explicit content_disposition, in any case, over the inline default', () => {
    expect(attachmentsFor([{ ...base, content_disposition: ' Inline ' }], 'brackets')[0]).to.include({ contentDisposition: 'inline' });
    expect(attachmentsFor([{ ...base, content_id: '<x@y>', content_disposition: 'attachment' }], 'brackets')[0]).to.include({
      cid: 'x@y',
      contentDisposition: 'attachment',
    });
  });

  it('refuses a content_disposition other than inline or attachment', () => {
    expect(appErrorOf(() => attachmentsFor([{ ...base, content_disposition: 'form-data' }], 'brackets'))).to.match(/attachments\[0\]\.content_disposition/);
  });
});
