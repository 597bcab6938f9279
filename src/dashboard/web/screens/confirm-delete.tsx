// Deleting asks first, in the page rather than in a browser dialog: "Delete" turns into the
// question, "Delete <thing>" and "Cancel" (focused, so Enter does not delete by accident).
import { useEffect, useRef, useState } from 'preact/hooks';
import { ErrorBox, messageOf } from '../ui.tsx';
import './hooks.css';

export function ConfirmDelete(props: { thing: string; onDelete: () => Promise<void> }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const cancel = useRef<HTMLButtonElement>(null);
  const start = useRef<HTMLButtonElement>(null);
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    (asking ? cancel : start).current?.focus();
  }, [asking]);

  const confirm = async () => {
    setBusy(true);
    setError(null);
    try {
      await props.onDelete();
    } catch (err) {
      setError(messageOf(err));
      setBusy(false);
    }
  };

  if (!asking)
    return (
      <button type="button" class="danger" ref={start} onClick={() => setAsking(true)}>
        Delete
      </button>
    );
  return (
    <div class="confirm-delete" role="group" aria-label={`Delete this ${props.thing}?`}>
      <span>Delete this {props.thing}? This cannot be undone.</span>
      <button type="button" class="danger" disabled={busy} onClick={() => void confirm()}>
        Delete {props.thing}
      </button>
      <button type="button" class="secondary" ref={cancel} disabled={busy} onClick={() => (setAsking(false), setError(null))}>
        Cancel
      </button>
      <ErrorBox error={error} />
    </div>
  );
}
