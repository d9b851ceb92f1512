import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client';
import type { SessionDetail } from '../api/types';

/** Follow-up questions; answers stream into the timeline as chat stages. */
export function ChatPanel({ session }: { session: SessionDetail }) {
  const queryClient = useQueryClient();
  const [text, setText] = useState('');
  const answering = Boolean(session.chat?.active_stage_id);
  const send = useMutation({
    mutationFn: (content: string) => api.chat(session.id, content),
    onSuccess: () => {
      setText('');
      void queryClient.invalidateQueries({ queryKey: ['session', session.id] });
    },
  });
  const empty = text.trim() === '';
  return (
    <section className="card chat" aria-labelledby="chat-title">
      <h2 id="chat-title">Follow-up chat</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!empty) send.mutate(text.trim());
        }}
      >
        <label htmlFor="chat-input">Ask a follow-up question about this investigation</label>
        <textarea
          id="chat-input"
          rows={3}
          value={text}
          onChange={(e) => setText(e.target.value)}
          onKeyDown={(e) => {
            // Ctrl/Cmd+Enter sends, Enter alone makes a new line.
            if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && !empty) send.mutate(text.trim());
          }}
        />
        <div className="actions">
          <button type="submit" disabled={empty || send.isPending || answering}>
            {answering ? 'Answering…' : 'Send'}
          </button>
        </div>
        <div role="status" aria-live="polite">
          {send.isError && <span className="error">{send.error.message}</span>}
          {answering && <span className="muted">The answer streams into the timeline above.</span>}
        </div>
      </form>
    </section>
  );
}
