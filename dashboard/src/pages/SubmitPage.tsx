import { useMutation } from '@tanstack/react-query';
import { useMemo, useRef, useState } from 'react';
import { useNavigate } from 'react-router';
import { api } from '../api/client';
import { useConfiguration } from '../components/hooks';
import { emptyForm, NATIVE_TOOLS, validateAlert, type AlertForm, type FormErrors } from '../state/alertForm';

export function SubmitPage() {
  const config = useConfiguration();
  const navigate = useNavigate();
  const [form, setForm] = useState<AlertForm>(emptyForm);
  const [errors, setErrors] = useState<FormErrors>({});
  const summaryRef = useRef<HTMLDivElement>(null);
  const submit = useMutation({
    mutationFn: api.submitAlert,
    onSuccess: (accepted) => navigate(`/sessions/${encodeURIComponent(accepted.session_id)}`),
  });
  const alertTypes = useMemo(
    () => [...new Set(config.data?.chains.flatMap((c) => c.alert_types) ?? [])].sort(),
    [config.data],
  );
  const set = <K extends keyof AlertForm>(key: K, value: AlertForm[K]) => setForm((f) => ({ ...f, [key]: value }));
  const describedBy = (field: keyof FormErrors) => (errors[field] ? `${field}-error` : undefined);

  return (
    <section aria-labelledby="submit-title" className="submit">
      <h1 id="submit-title">Submit an alert</h1>
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const { errors: found, request } = validateAlert(form);
          setErrors(found);
          if (request) submit.mutate(request);
          else summaryRef.current?.focus();
        }}
      >
        <div ref={summaryRef} tabIndex={-1} role="alert" className={submit.isError || Object.keys(errors).length ? 'error-summary' : ''}>
          {Object.keys(errors).length > 0 && <p>Correct the fields marked below.</p>}
          {submit.isError && <p className="server-error">The server refused the alert: {submit.error.message}</p>}
        </div>
        <div className="field">
          <label htmlFor="alert-type">Alert type</label>
          <select
            id="alert-type"
            value={form.alertType}
            aria-invalid={Boolean(errors.alertType)}
            aria-describedby={describedBy('alertType')}
            onChange={(e) => set('alertType', e.target.value)}
          >
            <option value="">Choose…</option>
            {alertTypes.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
          {errors.alertType && <p id="alertType-error" className="field-error">{errors.alertType}</p>}
        </div>
        <div className="field">
          <label htmlFor="chain">Chain (optional: otherwise chosen by alert type)</label>
          <select id="chain" value={form.chain} onChange={(e) => set('chain', e.target.value)}>
            <option value="">By alert type</option>
            {config.data?.chains.map((c) => (
              <option key={c.name} value={c.name}>
                {c.name}
              </option>
            ))}
          </select>
        </div>
        <fieldset className="field">
          <legend>Data format</legend>
          <label className="inline">
            <input type="radio" name="format" checked={form.dataFormat === 'text'} onChange={() => set('dataFormat', 'text')} />
            Text
          </label>
          <label className="inline">
            <input type="radio" name="format" checked={form.dataFormat === 'json'} onChange={() => set('dataFormat', 'json')} />
            JSON
          </label>
        </fieldset>
        <div className="field">
          <label htmlFor="alert-data">Alert data</label>
          <textarea
            id="alert-data"
            rows={8}
            value={form.data}
            aria-invalid={Boolean(errors.data)}
            aria-describedby={describedBy('data')}
            onChange={(e) => set('data', e.target.value)}
          />
          {errors.data && <p id="data-error" className="field-error">{errors.data}</p>}
        </div>
        <div className="field">
          <label htmlFor="runbook">Runbook URL (optional)</label>
          <input
            id="runbook"
            type="url"
            value={form.runbookUrl}
            aria-invalid={Boolean(errors.runbookUrl)}
            aria-describedby={describedBy('runbookUrl')}
            onChange={(e) => set('runbookUrl', e.target.value)}
          />
          {errors.runbookUrl && <p id="runbookUrl-error" className="field-error">{errors.runbookUrl}</p>}
        </div>
        <fieldset className="field" aria-describedby={describedBy('mcp')}>
          <legend>MCP servers</legend>
          <label className="inline">
            <input type="checkbox" checked={form.overrideMcp} onChange={(e) => set('overrideMcp', e.target.checked)} />
            Override the chain&apos;s MCP servers for this alert
          </label>
          {form.overrideMcp && (
            <div className="mcp-override">
              {(config.data?.mcp_servers ?? []).map((server) => {
                const on = server.name in form.servers;
                return (
                  <div key={server.name} className="mcp-server">
                    <label className="inline">
                      <input
                        type="checkbox"
                        checked={on}
                        onChange={(e) => {
                          const servers = { ...form.servers };
                          if (e.target.checked) servers[server.name] = '';
                          else delete servers[server.name];
                          set('servers', servers);
                        }}
                      />
                      {server.name}
                    </label>
                    {on && (
                      <label>
                        Tools of {server.name} (comma-separated; empty: all)
                        <input
                          value={form.servers[server.name] ?? ''}
                          onChange={(e) => set('servers', { ...form.servers, [server.name]: e.target.value })}
                        />
                      </label>
                    )}
                  </div>
                );
              })}
              <p className="muted small">Native tools (Gemini):</p>
              {NATIVE_TOOLS.map((tool) => (
                <label key={tool}>
                  {tool}
                  <select
                    value={tool in form.nativeTools ? String(form.nativeTools[tool]) : ''}
                    onChange={(e) => {
                      const nativeTools = { ...form.nativeTools };
                      if (e.target.value === '') delete nativeTools[tool];
                      else nativeTools[tool] = e.target.value === 'true';
                      set('nativeTools', nativeTools);
                    }}
                  >
                    <option value="">provider default</option>
                    <option value="true">on</option>
                    <option value="false">off</option>
                  </select>
                </label>
              ))}
            </div>
          )}
          {errors.mcp && <p id="mcp-error" className="field-error">{errors.mcp}</p>}
        </fieldset>
        <button type="submit" disabled={submit.isPending}>
          {submit.isPending ? 'Submitting…' : 'Submit alert'}
        </button>
      </form>
    </section>
  );
}
