import { describe, expect, it } from 'vitest';
import { emptyForm, MAX_DATA_BYTES, validateAlert, type AlertForm } from '../src/state/alertForm';

const form = (changes: Partial<AlertForm>): AlertForm => ({ ...emptyForm, ...changes });

describe('submit form checks', () => {
  it('flags the required fields', () => {
    const { errors, request } = validateAlert(emptyForm);
    expect(request).toBeNull();
    expect(errors.alertType).toBe('Choose an alert type.');
    expect(errors.data).toBe('Enter the alert data.');
  });

  it('sends text as text and JSON as JSON', () => {
    expect(validateAlert(form({ alertType: 'A', data: 'pod: web-0' })).request).toEqual({
      alert_type: 'A',
      data: 'pod: web-0',
    });
    expect(validateAlert(form({ alertType: 'A', dataFormat: 'json', data: '{"pod": "web-0"}' })).request).toEqual({
      alert_type: 'A',
      data: { pod: 'web-0' },
    });
  });

  it('refuses invalid JSON, null, oversized data and non-http runbooks', () => {
    expect(validateAlert(form({ alertType: 'A', dataFormat: 'json', data: '{"pod":' })).errors.data).toMatch(
      /^Not valid JSON/,
    );
    expect(validateAlert(form({ alertType: 'A', dataFormat: 'json', data: 'null' })).errors.data).toBe(
      'The alert data must not be null.',
    );
    expect(validateAlert(form({ alertType: 'A', data: 'x'.repeat(MAX_DATA_BYTES + 1) })).errors.data).toBe(
      'The alert data is larger than 1 MiB.',
    );
    for (const url of ['ftp://x/y', 'javascript:alert(1)', 'not a url']) {
      expect(validateAlert(form({ alertType: 'A', data: 'x', runbookUrl: url })).errors.runbookUrl).toBeDefined();
    }
    expect(validateAlert(form({ alertType: 'A', data: 'x', runbookUrl: 'https://runbooks/x' })).request?.runbook_url).toBe(
      'https://runbooks/x',
    );
  });

  it('builds the MCP selection: servers, tool lists, native tools', () => {
    expect(validateAlert(form({ alertType: 'A', data: 'x', overrideMcp: true })).errors.mcp).toBeDefined();
    const { request } = validateAlert(
      form({
        alertType: 'A',
        data: 'x',
        overrideMcp: true,
        servers: { kubernetes: 'pods_list, pods_log ,', time: '' },
        nativeTools: { google_search: false },
      }),
    );
    expect(request?.mcp_selection).toEqual({
      servers: [{ name: 'kubernetes', tools: ['pods_list', 'pods_log'] }, { name: 'time' }],
      native_tools: { google_search: false },
    });
  });
});
