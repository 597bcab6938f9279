import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { expect } from 'chai';

/**
 * The aggregate report of RFC 8460 §4.4 as a JSON schema, written from the RFC's field list
 * (§4.3, §4.4 and its example in Appendix B), to check what we send against.
 */
const RESULT_TYPES = [
  'starttls-not-supported',
  'certificate-host-mismatch',
  'certificate-expired',
  'certificate-not-trusted',
  'validation-failure',
  'tlsa-invalid',
  'dnssec-invalid',
  'dane-required',
  'sts-policy-fetch-error',
  'sts-policy-invalid',
  'sts-webpki-invalid',
];

const SCHEMA = {
  type: 'object',
  required: ['organization-name', 'date-range', 'contact-info', 'report-id', 'policies'],
  additionalProperties: false,
  properties: {
    'organization-name': { type: 'string', minLength: 1 },
    'date-range': {
      type: 'object',
      required: ['start-datetime', 'end-datetime'],
      additionalProperties: false,
      properties: { 'start-datetime': { type: 'string', format: 'date-time' }, 'end-datetime': { type: 'string', format: 'date-time' } },
    },
    'contact-info': { type: 'string', minLength: 1 },
    'report-id': { type: 'string', minLength: 1 },
    policies: {
      type: 'array',
      items: {
        type: 'object',
        required: ['policy', 'summary'],
        additionalProperties: false,
        properties: {
          policy: {
            type: 'object',
            required: ['policy-type', 'policy-domain'],
            additionalProperties: false,
            properties: {
              'policy-type': { enum: ['tlsa', 'sts', 'no-policy-found'] },
              'policy-string': { type: 'array', items: { type: 'string' } },
              'policy-domain': { type: 'string', minLength: 1 },
              'mx-host': { type: 'array', items: { type: 'string' } },
            },
          },
          summary: {
            type: 'object',
            required: ['total-successful-session-count', 'total-failure-session-count'],
            additionalProperties: false,
            properties: {
              'total-successful-session-count': { type: 'integer', minimum: 0 },
              'total-failure-session-count': { type: 'integer', minimum: 0 },
            },
          },
          'failure-details': {
            type: 'array',
            items: {
              type: 'object',
              required: ['result-type', 'failed-session-count'],
              additionalProperties: false,
              properties: {
                'result-type': { enum: RESULT_TYPES },
                'sending-mta-ip': { type: 'string', anyOf: [{ format: 'ipv4' }, { format: 'ipv6' }] },
                'receiving-mx-hostname': { type: 'string' },
                'receiving-mx-helo': { type: 'string' },
                'receiving-ip': { type: 'string', anyOf: [{ format: 'ipv4' }, { format: 'ipv6' }] },
                'failed-session-count': { type: 'integer', minimum: 1 },
                'additional-information': { type: 'string' },
                'failure-reason-code': { type: 'string' },
              },
            },
          },
        },
      },
    },
  },
};

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv);
const validate = ajv.compile(SCHEMA);

/** Fails the test unless `report` is an RFC 8460 aggregate report. */
export function assertTlsReport(report: unknown): void {
  const valid = validate(report);
  expect(valid, JSON.stringify(validate.errors)).to.equal(true);
}
