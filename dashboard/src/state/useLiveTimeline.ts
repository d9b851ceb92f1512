import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useRef, useState } from 'react';
import { api } from '../api/client';
import type { TimelineEvent } from '../api/types';
import { useChannel } from '../api/live';
import { applyLiveEvent, emptyTimeline, mergeSnapshot, type LiveEvent, type TimelineState } from './timeline';

/** Events after which the session's stages and executions are read again. */
const STRUCTURE_EVENTS = new Set(['session.status', 'stage.status', 'chat.created', 'chat.user_message']);

/**
 * The session's timeline: the REST snapshot merged with its channel's live
 * events. Stage and status changes refetch the session detail (coalesced);
 * a catch-up overflow reloads the snapshot.
 */
export function useLiveTimeline(sessionId: string, knownExecutions: ReadonlySet<string>): TimelineState {
  const queryClient = useQueryClient();
  const [state, setState] = useState<TimelineState>(emptyTimeline);
  const snapshot = useQuery({
    queryKey: ['timeline', sessionId],
    queryFn: () => api.timeline(sessionId),
    staleTime: Number.POSITIVE_INFINITY,
  });
  // Merge each snapshot once, while rendering (no extra effect pass).
  const [merged, setMerged] = useState<TimelineEvent[] | undefined>(undefined);
  if (snapshot.data && snapshot.data !== merged) {
    const data = snapshot.data;
    setMerged(data);
    setState((s) => mergeSnapshot(s, data));
  }

  const known = useRef(knownExecutions);
  useEffect(() => {
    known.current = knownExecutions;
  }, [knownExecutions]);
  const refetchTimer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const refetchDetail = useCallback(() => {
    if (refetchTimer.current) return;
    refetchTimer.current = setTimeout(() => {
      refetchTimer.current = null;
      void queryClient.invalidateQueries({ queryKey: ['session', sessionId] });
      void queryClient.invalidateQueries({ queryKey: ['trace', sessionId] });
    }, 150);
  }, [queryClient, sessionId]);
  useEffect(
    () => () => {
      if (refetchTimer.current) clearTimeout(refetchTimer.current);
    },
    [],
  );

  const onEvent = useCallback(
    (event: LiveEvent) => {
      setState((s) => applyLiveEvent(s, event));
      const execution = event.execution_id;
      if (
        STRUCTURE_EVENTS.has(event.type) ||
        event.type === 'subscription.confirmed' ||
        (event.type === 'timeline_event.created' && typeof execution === 'string' && !known.current.has(execution))
      ) {
        refetchDetail();
      }
    },
    [refetchDetail],
  );
  useChannel(`session:${sessionId}`, onEvent);

  const needsReload = state.needsReload;
  useEffect(() => {
    if (!needsReload) return;
    let cancelled = false;
    api.timeline(sessionId).then(
      (events) => {
        if (!cancelled) setState((s) => mergeSnapshot(s, events));
      },
      () => {
        // Keep the flag: the next overflow or reconnect tries again.
      },
    );
    return () => {
      cancelled = true;
    };
  }, [needsReload, sessionId]);

  return state;
}
