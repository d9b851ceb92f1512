import { useEffect, useRef, useState, type ReactNode } from 'react';
import { MEMORY_CATEGORIES, MEMORY_VALENCES, type Memory, type MemoryCategory, type MemoryPatch, type MemoryValence } from '../api/types';
import { memoryForm, memoryPatch } from '../state/memoryList';

/** The most characters a memory holds (the server refuses more). */
const MAX_CONTENT = 2000;

/**
 * Corrects a memory in a modal dialog, usable from the keyboard alone: focus
 * starts on the text, Tab moves through category, valence and confidence,
 * Enter on Save (or Ctrl+Enter in the text) saves, Escape closes. Only the
 * fields that changed are sent; nothing changed just closes. The server's
 * refusal (an empty text, a confidence outside 0–1…) is shown as sent.
 */
export function MemoryEditDialog({
  memory,
  pending,
  error,
  onSubmit,
  onClose,
}: {
  memory: Memory;
  pending: boolean;
  error: string | null;
  onSubmit: (change: MemoryPatch) => void;
  onClose: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [form, setForm] = useState(() => memoryForm(memory));
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
    d?.querySelector<HTMLTextAreaElement>('textarea')?.focus();
  }, []);
  const submit = () => {
    const patch = memoryPatch(memory, form);
    if (typeof patch === 'string') {
      setProblem(patch);
      return;
    }
    setProblem(null);
    if (patch) onSubmit(patch);
    else dialog.current?.close();
  };
  const shown = problem ?? error;
  return (
    <dialog ref={dialog} className="review-dialog memory-dialog" aria-labelledby="memory-edit-title" onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <h2 id="memory-edit-title">Edit the memory</h2>
        <label htmlFor="memory-content">Content</label>
        <textarea
          id="memory-content"
          rows={5}
          value={form.content}
          aria-describedby="memory-content-hint"
          onChange={(e) => setForm({ ...form, content: e.target.value })}
          onKeyDown={(e) => e.key === 'Enter' && (e.ctrlKey || e.metaKey) && submit()}
        />
        <p id="memory-content-hint" className="hint small">
          {form.content.trim().length} / {MAX_CONTENT} characters. Secrets (keys, tokens, passwords, e-mail addresses…)
          are masked when it is saved.
        </p>
        <div className="memory-dialog-fields">
          <div className="filter">
            <label htmlFor="memory-category">Category</label>
            <select
              id="memory-category"
              value={form.category}
              onChange={(e) => setForm({ ...form, category: e.target.value as MemoryCategory })}
            >
              {MEMORY_CATEGORIES.map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </div>
          <div className="filter">
            <label htmlFor="memory-valence">Valence</label>
            <select
              id="memory-valence"
              value={form.valence}
              onChange={(e) => setForm({ ...form, valence: e.target.value as MemoryValence })}
            >
              {MEMORY_VALENCES.map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </div>
          <div className="filter">
            <label htmlFor="memory-confidence">Confidence (0–1)</label>
            <input
              id="memory-confidence"
              type="number"
              min={0}
              max={1}
              step="any"
              inputMode="decimal"
              value={form.confidence}
              onChange={(e) => setForm({ ...form, confidence: e.target.value })}
            />
          </div>
        </div>
        {shown && (
          <p role="alert" className="error">
            {shown}
          </p>
        )}
        <div className="actions">
          <button type="submit" disabled={pending}>
            Save
          </button>
          <button type="button" className="button-secondary" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
        </div>
      </form>
    </dialog>
  );
}

/**
 * Asks before something that cannot be undone, in a modal dialog: focus
 * starts on Cancel, Escape closes.
 */
export function ConfirmDialog({
  title,
  children,
  confirmLabel,
  pending,
  error,
  onConfirm,
  onClose,
}: {
  title: string;
  children: ReactNode;
  confirmLabel: string;
  pending: boolean;
  error: string | null;
  onConfirm: () => void;
  onClose: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
    cancel.current?.focus();
  }, []);
  return (
    <dialog ref={dialog} className="review-dialog" aria-labelledby="confirm-title" onClose={onClose}>
      <h2 id="confirm-title">{title}</h2>
      {children}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      <div className="actions">
        <button type="button" className="button-danger" disabled={pending} onClick={onConfirm}>
          {confirmLabel}
        </button>
        <button ref={cancel} type="button" className="button-secondary" onClick={() => dialog.current?.close()}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}
