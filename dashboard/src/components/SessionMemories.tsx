import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useRef } from 'react';
import { Link } from 'react-router';
import { api } from '../api/client';
import { useChannel } from '../api/live';
import type { Memory } from '../api/types';
import type { LiveEvent } from '../state/timeline';
import { formatConfidence } from './format';
import { CategoryBadge, DeprecatedBadge, ValenceBadge } from './MemoryBadges';

/**
 * The memories a session was given (in its prompt, in their order there)
 * and those it taught, each linking to the memory page. Nothing at all when
 * it has neither, like the page's other optional panels. Refreshed when a
 * stage changes: what a reflector (a stage of its own, after the score)
 * learned is stored before its stage's end is announced.
 */
export function SessionMemories({ sessionId }: { sessionId: string }) {
  const queryClient = useQueryClient();
  const memories = useQuery({
    queryKey: ['session-memories', sessionId],
    queryFn: () => api.sessionMemories(sessionId),
  });
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => () => {
    if (timer.current) clearTimeout(timer.current);
  }, []);
  const onEvent = useCallback(
    (event: LiveEvent) => {
      if (event.type !== 'stage.status' && event.type !== 'session.status' && event.type !== 'session.review') return;
      if (timer.current) clearTimeout(timer.current);
      timer.current = setTimeout(
        () => void queryClient.invalidateQueries({ queryKey: ['session-memories', sessionId] }),
        200,
      );
    },
    [queryClient, sessionId],
  );
  useChannel(`session:${sessionId}`, onEvent);

  if (memories.isError) {
    return (
      <section className="card" aria-labelledby="session-memories-title">
        <h2 id="session-memories-title">Memories</h2>
        <p className="error">Cannot load the memories: {memories.error.message}</p>
      </section>
    );
  }
  const data = memories.data;
  if (!data || (data.injected.length === 0 && data.learned.length === 0)) return null;
  return (
    <section className="card session-memories" aria-labelledby="session-memories-title">
      <h2 id="session-memories-title">Memories</h2>
      <MemoryGroup
        id="memories-used"
        title="Memories used"
        hint="Put into this investigation's prompt from past investigations."
        memories={data.injected}
      />
      <MemoryGroup
        id="memories-learned"
        title="Memories learned"
        hint="Learned from this investigation once it was scored."
        memories={data.learned}
      />
    </section>
  );
}

function MemoryGroup({ id, title, hint, memories }: { id: string; title: string; hint: string; memories: Memory[] }) {
  return (
    <section aria-labelledby={id} className="memory-group" data-group={id}>
      <h3 id={id}>
        {title} <span className="count">({memories.length})</span>
      </h3>
      {memories.length === 0 ? (
        <p className="empty">None.</p>
      ) : (
        <>
          <p className="hint small">{hint}</p>
          <ul className="memory-items">
            {memories.map((m) => (
              <li key={m.id} data-memory-id={m.id}>
                <Link to={`/memories?id=${encodeURIComponent(m.id)}`}>{m.content}</Link>
                <div className="memory-item-meta">
                  <CategoryBadge category={m.category} /> <ValenceBadge valence={m.valence} />{' '}
                  <span className="muted small">confidence {formatConfidence(m.confidence)}</span>
                  {m.deprecated && (
                    <>
                      {' '}
                      <DeprecatedBadge />
                    </>
                  )}
                </div>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
