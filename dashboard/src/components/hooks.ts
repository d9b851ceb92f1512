import { useQuery } from '@tanstack/react-query';
import { useCallback, useEffect, useState } from 'react';
import { useSearchParams } from 'react-router';
import { api } from '../api/client';

/** The configured chains, agents, providers and MCP servers (rarely change). */
export function useConfiguration() {
  return useQuery({ queryKey: ['configuration'], queryFn: api.configuration, staleTime: 60_000 });
}

/** The current time, refreshed every `intervalMs` (running durations). */
export function useNow(intervalMs: number): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs]);
  return now;
}

/**
 * A list page's state in the URL: its parameters, and an update that sets
 * (or, with `null` or an empty value, removes) some of them in place —
 * any change but the page's own starts from the first page.
 */
export function useListParams(): [URLSearchParams, (changes: Record<string, string | null>) => void] {
  const [params, setParams] = useSearchParams();
  const update = useCallback(
    (changes: Record<string, string | null>) =>
      setParams(
        (current) => {
          const next = new URLSearchParams(current);
          for (const [key, value] of Object.entries(changes)) {
            if (value === null || value === '') next.delete(key);
            else next.set(key, value);
          }
          if (!('page' in changes)) next.delete('page');
          return next;
        },
        { replace: true },
      ),
    [setParams],
  );
  return [params, update];
}
