import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useMemo, useState, type ReactNode } from 'react';
import { Link } from 'react-router';
import { api, ApiError } from '../api/client';
import { MEMORY_CATEGORIES, MEMORY_VALENCES, type Memory, type MemoryPatch } from '../api/types';
import { formatAge, formatConfidence, formatTime } from '../components/format';
import { Filter } from '../components/Filter';
import { useListParams, useNow } from '../components/hooks';
import { CategoryBadge, DeprecatedBadge, ValenceBadge } from '../components/MemoryBadges';
import { ConfirmDialog, MemoryEditDialog } from '../components/MemoryDialog';
import { MEMORY_PAGE_SIZE, memoryApiQuery, readMemoryParams } from '../state/memoryList';

/** What a dialog is open on. */
type Open = { kind: 'edit' | 'delete'; memory: Memory } | null;

/** A memory named in a button's accessible name: the start of its text. */
function shortName(memory: Memory): string {
  const text = memory.content.replace(/\s+/g, ' ');
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** Every cached view of memories is read again after a change. */
function useInvalidateMemories() {
  const queryClient = useQueryClient();
  return useCallback(() => {
    void queryClient.invalidateQueries({ queryKey: ['memories'] });
    void queryClient.invalidateQueries({ queryKey: ['memory'] });
    void queryClient.invalidateQueries({ queryKey: ['session-memories'] });
  }, [queryClient]);
}

/**
 * What TARSy has learned from scored investigations: search, filter by
 * category, valence and deprecation (all in the URL), and correct,
 * deprecate, restore or delete a memory. `?id=` opens one memory (the
 * session page links here) and highlights it in the list.
 */
export function MemoryPage() {
  const [params, update] = useListParams();
  const state = useMemo(() => readMemoryParams(params), [params]);
  // Closing the linked memory keeps the list where it is.
  const closeLinked = useCallback(
    () => update({ id: null, page: state.page > 1 ? String(state.page) : null }),
    [update, state.page],
  );
  const now = useNow(30_000);
  const query = memoryApiQuery(state);
  const memories = useQuery({
    queryKey: ['memories', query],
    queryFn: () => api.memories(query),
    placeholderData: keepPreviousData,
  });

  const [search, setSearch] = useState(state.q);
  useEffect(() => {
    const timer = setTimeout(() => {
      if (state.q !== search) update({ q: search });
    }, 300);
    return () => clearTimeout(timer);
  }, [search, state.q, update]);

  const invalidate = useInvalidateMemories();
  const [open, setOpen] = useState<Open>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const said = (message: string) => {
    setNotice(message);
    setFailure(null);
  };
  const failed = (e: Error) => {
    setNotice(null);
    setFailure(e.message);
  };
  const edit = useMutation({
    mutationFn: ({ id, patch }: { id: string; patch: MemoryPatch }) => api.updateMemory(id, patch),
    onSuccess: (memory, { patch }) => {
      setOpen(null);
      said(
        patch.content != null && memory.content !== patch.content
          ? 'Memory saved. Part of its text was masked: a memory never keeps a secret.'
          : 'Memory saved.',
      );
    },
    onSettled: invalidate,
  });
  const deprecate = useMutation({
    mutationFn: (id: string) => api.deprecateMemory(id),
    onSuccess: () => said('Memory deprecated: it is kept, but never recalled.'),
    onError: failed,
    onSettled: invalidate,
  });
  const restore = useMutation({
    mutationFn: (id: string) => api.updateMemory(id, { deprecated: false }),
    onSuccess: () => said('Memory restored: it can be recalled again.'),
    onError: failed,
    onSettled: invalidate,
  });
  const remove = useMutation({
    mutationFn: (id: string) => api.deleteMemory(id),
    onSuccess: (_, id) => {
      setOpen(null);
      said('Memory deleted.');
      if (state.id === id) closeLinked();
    },
    onSettled: invalidate,
  });
  const busy = deprecate.isPending || restore.isPending || remove.isPending || edit.isPending;
  const actions = (memory: Memory) => (
    <MemoryActions
      memory={memory}
      busy={busy}
      onEdit={() => {
        edit.reset();
        setOpen({ kind: 'edit', memory });
      }}
      onDeprecate={() => deprecate.mutate(memory.id)}
      onRestore={() => restore.mutate(memory.id)}
      onDelete={() => {
        remove.reset();
        setOpen({ kind: 'delete', memory });
      }}
    />
  );

  const data = memories.data;
  const filtered = Boolean(state.q.trim() || state.category || state.valence);
  const pages = data ? Math.max(1, Math.ceil(data.total / MEMORY_PAGE_SIZE)) : 1;

  return (
    <section aria-labelledby="memories-title" className="memories">
      <h1 id="memories-title">Memory</h1>
      <p className="hint">
        Short lessons TARSy learned from scored investigations; the ones that match a new alert go into its
        investigation&apos;s prompt. Correct a wrong one, deprecate one that should no longer be recalled, or delete it.
      </p>
      <form className="filters" role="search" aria-label="Filter memories" onSubmit={(e) => e.preventDefault()}>
        <Filter id="memory-search" label="Search">
          <input
            id="memory-search"
            type="search"
            value={search}
            onChange={(e) => setSearch(e.target.value)}
            placeholder="words of the memory"
          />
        </Filter>
        <Filter id="memory-filter-category" label="Category">
          <select
            id="memory-filter-category"
            value={state.category}
            onChange={(e) => update({ category: e.target.value })}
          >
            <option value="">any</option>
            {MEMORY_CATEGORIES.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </Filter>
        <Filter id="memory-filter-valence" label="Valence">
          <select id="memory-filter-valence" value={state.valence} onChange={(e) => update({ valence: e.target.value })}>
            <option value="">any</option>
            {MEMORY_VALENCES.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </Filter>
        <label className="inline filter-checkbox">
          <input
            type="checkbox"
            checked={state.showDeprecated}
            onChange={(e) => update({ deprecated: e.target.checked ? 'show' : null })}
          />
          Show deprecated
        </label>
      </form>

      <div role="status" aria-live="polite">
        {notice}
      </div>
      {failure && (
        <p role="alert" className="error">
          {failure}
        </p>
      )}

      {state.id && (
        <LinkedMemory
          id={state.id}
          now={now}
          actions={actions}
          onClose={closeLinked}
        />
      )}

      {memories.isError && (
        <p role="alert" className="error">
          Cannot load the memories: {memories.error.message}
        </p>
      )}
      {!data && !memories.isError && <p aria-busy="true">Loading the memories…</p>}
      {data && data.memories.length > 0 && (
        <table className="memory-table">
          <caption className="visually-hidden">Memories, {data.total} in all</caption>
          <thead>
            <tr>
              <th scope="col">Memory</th>
              <th scope="col">Category</th>
              <th scope="col">Valence</th>
              <th scope="col">Confidence</th>
              <th scope="col">Seen</th>
              <th scope="col">Learned from</th>
              <th scope="col">Last reinforced</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {data.memories.map((m) => {
              const linked = m.id === state.id;
              return (
                <tr
                  key={m.id}
                  data-memory-id={m.id}
                  className={`${linked ? 'highlighted' : ''} ${m.deprecated ? 'memory-deprecated' : ''}`.trim() || undefined}
                  aria-current={linked ? 'true' : undefined}
                >
                  <td className="memory-content">
                    {m.deprecated && (
                      <>
                        <DeprecatedBadge />{' '}
                      </>
                    )}
                    {m.content}
                  </td>
                  <td>
                    <CategoryBadge category={m.category} />
                  </td>
                  <td>
                    <ValenceBadge valence={m.valence} />
                  </td>
                  <td>{formatConfidence(m.confidence)}</td>
                  <td>{m.seen_count}</td>
                  <td>
                    <SourceLink memory={m} />
                  </td>
                  <td>
                    <Age iso={m.last_reinforced_at} now={now} />
                  </td>
                  <td>{actions(m)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {data && data.memories.length === 0 && (
        <p className="empty">
          {filtered || state.page > 1
            ? 'No memories match.'
            : state.showDeprecated
              ? 'No memories yet: TARSy learns them from scored investigations when memory is enabled.'
              : 'No live memories: TARSy learns them from scored investigations when memory is enabled.'}
        </p>
      )}
      {data && (data.total > 0 || state.page > 1) && (
        <nav className="pagination" aria-label="Pages">
          <button type="button" disabled={state.page <= 1} onClick={() => update({ page: String(state.page - 1) })}>
            Previous
          </button>
          <span>
            Page {state.page} of {pages} ({data.total} {data.total === 1 ? 'memory' : 'memories'})
          </span>
          <button type="button" disabled={state.page >= pages} onClick={() => update({ page: String(state.page + 1) })}>
            Next
          </button>
        </nav>
      )}

      {open?.kind === 'edit' && (
        <MemoryEditDialog
          memory={open.memory}
          pending={edit.isPending}
          error={edit.error?.message ?? null}
          onClose={() => setOpen(null)}
          onSubmit={(patch) => edit.mutate({ id: open.memory.id, patch })}
        />
      )}
      {open?.kind === 'delete' && (
        <ConfirmDialog
          title="Delete this memory?"
          confirmLabel="Delete"
          pending={remove.isPending}
          error={remove.error?.message ?? null}
          onClose={() => setOpen(null)}
          onConfirm={() => remove.mutate(open.memory.id)}
        >
          <blockquote className="memory-quote">{open.memory.content}</blockquote>
          <p>
            It is gone for good, with the records of the sessions it was put into. To keep it but stop it being
            recalled, deprecate it instead.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

/** The memory `?id=` names, in full, with its actions. */
function LinkedMemory({
  id,
  now,
  actions,
  onClose,
}: {
  id: string;
  now: number;
  actions: (memory: Memory) => ReactNode;
  onClose: () => void;
}) {
  const memory = useQuery({ queryKey: ['memory', id], queryFn: () => api.memory(id) });
  const close = (
    <button type="button" className="button-small" onClick={onClose}>
      Close<span className="visually-hidden"> the linked memory</span>
    </button>
  );
  if (memory.isError) {
    const gone = memory.error instanceof ApiError && memory.error.status === 404;
    return (
      <section className="card linked-memory" aria-labelledby="linked-memory-title">
        <h2 id="linked-memory-title">Linked memory</h2>
        <p role="alert" className={gone ? 'empty' : 'error'}>
          {gone ? `There is no memory ${id}: it may have been deleted.` : `Cannot load the memory: ${memory.error.message}`}
        </p>
        {close}
      </section>
    );
  }
  const m = memory.data;
  if (!m) return <p aria-busy="true">Loading the memory…</p>;
  return (
    <section className="card linked-memory highlighted" aria-labelledby="linked-memory-title" data-memory-id={m.id}>
      <h2 id="linked-memory-title">Linked memory</h2>
      <p className="memory-text">
        {m.deprecated && (
          <>
            <DeprecatedBadge />{' '}
          </>
        )}
        {m.content}
      </p>
      <dl className="meta">
        <dt>Category</dt>
        <dd>
          <CategoryBadge category={m.category} />
        </dd>
        <dt>Valence</dt>
        <dd>
          <ValenceBadge valence={m.valence} />
        </dd>
        <dt>Confidence</dt>
        <dd>{formatConfidence(m.confidence)}</dd>
        <dt>Seen</dt>
        <dd>{m.seen_count === 1 ? 'once' : `${m.seen_count} times`}</dd>
        <dt>Learned from</dt>
        <dd>
          <SourceLink memory={m} />
          {m.chain_id && <span className="muted"> · chain {m.chain_id}</span>}
        </dd>
        <dt>Last reinforced</dt>
        <dd>
          <Age iso={m.last_reinforced_at} now={now} /> <span className="muted small">({formatTime(m.last_reinforced_at)})</span>
        </dd>
        <dt>Written</dt>
        <dd>{formatTime(m.created_at)}</dd>
        <dt>Last changed</dt>
        <dd>{formatTime(m.updated_at)}</dd>
        <dt>Scope</dt>
        <dd>
          <code>{m.scope}</code>
        </dd>
        <dt>Id</dt>
        <dd>
          <code>{m.id}</code>
        </dd>
      </dl>
      <div className="actions">
        {actions(m)}
        {close}
      </div>
    </section>
  );
}

function MemoryActions({
  memory,
  busy,
  onEdit,
  onDeprecate,
  onRestore,
  onDelete,
}: {
  memory: Memory;
  busy: boolean;
  onEdit: () => void;
  onDeprecate: () => void;
  onRestore: () => void;
  onDelete: () => void;
}) {
  const which = <span className="visually-hidden"> memory “{shortName(memory)}”</span>;
  return (
    <div className="row-actions">
      <button type="button" className="button-small" onClick={onEdit}>
        Edit{which}
      </button>
      {memory.deprecated ? (
        <button type="button" className="button-small" disabled={busy} onClick={onRestore}>
          Restore{which}
        </button>
      ) : (
        <button type="button" className="button-small" disabled={busy} onClick={onDeprecate}>
          Deprecate{which}
        </button>
      )}
      <button type="button" className="button-small button-small-danger" onClick={onDelete}>
        Delete{which}
      </button>
    </div>
  );
}

/** The session a memory was learned from, or "—" when it was written otherwise. */
function SourceLink({ memory }: { memory: Memory }) {
  if (!memory.source_session_id) return <span className="muted">—</span>;
  return (
    <Link to={`/sessions/${encodeURIComponent(memory.source_session_id)}`}>
      {memory.alert_type ?? 'session'}
      <span className="visually-hidden"> session {memory.source_session_id}</span>
    </Link>
  );
}

function Age({ iso, now }: { iso: string; now: number }) {
  return (
    <time dateTime={iso} title={formatTime(iso)}>
      {formatAge(iso, now)}
    </time>
  );
}
