import { useState } from 'react';

/** Copies text to the clipboard; says whether it worked. */
export function CopyButton({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState<'idle' | 'copied' | 'failed'>('idle');
  return (
    <button
      type="button"
      className="button-small"
      onClick={() => {
        navigator.clipboard.writeText(text).then(
          () => setDone('copied'),
          () => setDone('failed'),
        );
      }}
    >
      {done === 'copied' ? 'Copied' : done === 'failed' ? 'Copy failed' : label}
    </button>
  );
}
