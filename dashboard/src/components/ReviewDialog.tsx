import { useEffect, useRef, useState } from 'react';
import { RATINGS, type ReviewRating, type ReviewRequest } from '../api/types';

/** What the dialog is for: one session, or several at once (bulk). */
export interface ReviewTarget {
  /** What the heading names (an alert type, or "3 sessions"). */
  title: string;
  /** Editing a finished review (`update`) rather than reviewing. */
  editing: boolean;
  /** The current verdict, when editing. */
  rating?: ReviewRating | null;
  actionTaken?: string | null;
  feedback?: string | null;
}

/**
 * The review form in a modal dialog, usable from the keyboard alone: focus
 * starts on the verdict, arrows choose it, Tab moves to the notes, Enter on
 * the submit button (or Ctrl+Enter in a note) sends, Escape closes. The
 * verdict is a rating or *acknowledge without a rating*.
 */
export function ReviewDialog({
  target,
  pending,
  error,
  onSubmit,
  onClose,
}: {
  target: ReviewTarget;
  pending: boolean;
  error: string | null;
  onSubmit: (change: ReviewRequest) => void;
  onClose: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [verdict, setVerdict] = useState<ReviewRating | 'acknowledge'>(target.rating ?? 'accurate');
  const [actionTaken, setActionTaken] = useState(target.actionTaken ?? '');
  const [feedback, setFeedback] = useState(target.feedback ?? '');
  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
    d?.querySelector<HTMLInputElement>('input[name="verdict"]:checked')?.focus();
  }, []);
  const submit = () => {
    const notes = {
      action_taken: actionTaken.trim() || null,
      feedback: feedback.trim() || null,
    };
    if (target.editing) {
      onSubmit({ action: 'update', rating: verdict === 'acknowledge' ? null : verdict, ...notes });
    } else if (verdict === 'acknowledge') {
      onSubmit({ action: 'acknowledge', ...notes });
    } else {
      onSubmit({ action: 'complete', rating: verdict, ...notes });
    }
  };
  const options: [ReviewRating | 'acknowledge', string][] = target.editing
    ? [...RATINGS]
    : [...RATINGS, ['acknowledge', 'Acknowledge without a rating']];
  return (
    <dialog ref={dialog} className="review-dialog" aria-labelledby="review-title" onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <h2 id="review-title">
          {target.editing ? 'Edit the review of' : 'Review'} {target.title}
        </h2>
        <fieldset>
          <legend>Was the investigation right?</legend>
          {options.map(([value, label]) => (
            <label key={value} className="radio">
              <input
                type="radio"
                name="verdict"
                value={value}
                checked={verdict === value}
                onChange={() => setVerdict(value)}
              />
              {label}
            </label>
          ))}
        </fieldset>
        <label htmlFor="review-action-taken">Action taken (optional)</label>
        <textarea
          id="review-action-taken"
          rows={2}
          value={actionTaken}
          onChange={(e) => setActionTaken(e.target.value)}
          onKeyDown={(e) => e.key === 'Enter' && (e.ctrlKey || e.metaKey) && submit()}
        />
        <label htmlFor="review-feedback">Feedback on the investigation (optional)</label>
        <textarea
          id="review-feedback"
          rows={3}
          value={feedback}
          onChange={(e) => setFeedback(e.target.value)}
          onKeyDown={(e) => e.key === 'Enter' && (e.ctrlKey || e.metaKey) && submit()}
        />
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        <div className="actions">
          <button type="submit" disabled={pending}>
            {target.editing ? 'Save' : 'Submit review'}
          </button>
          <button type="button" className="button-secondary" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
        </div>
      </form>
    </dialog>
  );
}
