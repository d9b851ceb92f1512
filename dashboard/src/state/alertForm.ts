// Checks of the submit form, before anything is sent. The server checks
// again; its 400 message is shown as it comes.

import type { AlertRequest, McpSelection } from '../api/types';

export interface AlertForm {
  alertType: string;
  chain: string;
  dataFormat: 'text' | 'json';
  data: string;
  runbookUrl: string;
  /** Override the chain's MCP servers for this alert. */
  overrideMcp: boolean;
  /** Selected servers → comma-separated tools ('' = all tools). */
  servers: Record<string, string>;
  /** Native tools override: name → on/off; absent = the provider's default. */
  nativeTools: Record<string, boolean>;
}

export const NATIVE_TOOLS = ['google_search', 'code_execution', 'url_context'] as const;

export const emptyForm: AlertForm = {
  alertType: '',
  chain: '',
  dataFormat: 'text',
  data: '',
  runbookUrl: '',
  overrideMcp: false,
  servers: {},
  nativeTools: {},
};

export type FormErrors = Partial<Record<'alertType' | 'data' | 'runbookUrl' | 'mcp', string>>;

/** Largest alert data the API takes (1 MiB). */
export const MAX_DATA_BYTES = 1_048_576;

/** Field errors (empty when the form can be sent) and the request to send. */
export function validateAlert(form: AlertForm): { errors: FormErrors; request: AlertRequest | null } {
  const errors: FormErrors = {};
  if (!form.alertType.trim()) errors.alertType = 'Choose an alert type.';
  let data: unknown = form.data;
  if (!form.data.trim()) {
    errors.data = 'Enter the alert data.';
  } else if (new TextEncoder().encode(form.data).length > MAX_DATA_BYTES) {
    errors.data = 'The alert data is larger than 1 MiB.';
  } else if (form.dataFormat === 'json') {
    try {
      data = JSON.parse(form.data);
    } catch (e) {
      errors.data = `Not valid JSON: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (data === null) errors.data = 'The alert data must not be null.';
  }
  const url = form.runbookUrl.trim();
  if (url) {
    let ok = false;
    try {
      const parsed = new URL(url);
      ok = parsed.protocol === 'http:' || parsed.protocol === 'https:';
    } catch {
      ok = false;
    }
    if (!ok) errors.runbookUrl = 'The runbook URL must be an http:// or https:// URL.';
  }
  let selection: McpSelection | undefined;
  if (form.overrideMcp) {
    const servers = Object.entries(form.servers).map(([name, tools]) => {
      const list = tools
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean);
      return list.length ? { name, tools: list } : { name };
    });
    if (servers.length === 0) errors.mcp = 'Select at least one MCP server, or turn the override off.';
    selection = { servers };
    if (Object.keys(form.nativeTools).length) selection.native_tools = { ...form.nativeTools };
  }
  if (Object.keys(errors).length) return { errors, request: null };
  const request: AlertRequest = { alert_type: form.alertType.trim(), data };
  if (form.chain) request.chain = form.chain;
  if (url) request.runbook_url = url;
  if (selection) request.mcp_selection = selection;
  return { errors, request };
}
