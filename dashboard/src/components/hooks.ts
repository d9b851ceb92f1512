import { useQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
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
