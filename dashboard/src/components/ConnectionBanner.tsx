import { useConnectionState } from '../api/live';

/** Says so while live updates are interrupted; gone once the socket is back. */
export function ConnectionBanner() {
  const { dropped } = useConnectionState();
  return (
    <div role="status" aria-live="polite" className={dropped ? 'banner banner-warning' : 'visually-hidden'}>
      {dropped ? 'Live updates interrupted — reconnecting… What happens meanwhile is caught up on reconnect.' : ''}
    </div>
  );
}
