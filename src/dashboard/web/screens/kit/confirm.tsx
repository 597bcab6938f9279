// A question before a change that cannot be undone: a modal <dialog> (the browser moves focus
// into it, keeps it there, closes it on Escape and gives focus back), optionally asking for a
// reason or for a word typed out when the change is large.
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { ErrorBox, useAction } from '../../ui.tsx';
import './kit.css';

export interface ConfirmProps {
  title: string;
  /** The confirming button's words ("Delete key"); never just "OK". */
  confirmLabel: string;
  danger?: boolean;
  /** Asks for a reason (1..max characters) and hands it to onConfirm. */
  reason?: { label: string; max: number };
  /** The confirming button stays disabled until this is typed exactly. */
  typed?: string;
  children?: ComponentChildren;
  /** Does the change; a rejection is shown in the dialog, which stays open. */
  onConfirm: (reason: string) => Promise<void>;
  /** The dialog closed (confirmed, cancelled or Escape). */
  onClose: () => void;
}

export function ConfirmDialog(props: ConfirmProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  const [reason, setReason] = useState('');
  const [typed, setTyped] = useState('');
  const { busy, error, run } = useAction();

  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
  }, []);

  const ready = !busy && (!props.reason || reason.trim().length > 0) && (props.typed === undefined || typed === props.typed);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!ready) return;
    if (await run(() => props.onConfirm(reason.trim()))) ref.current?.close();
  };

  return (
    <dialog ref={ref} class="confirm" aria-labelledby={`${id}-title`} onClose={props.onClose}>
      <form onSubmit={(e) => void submit(e)}>
        <h2 id={`${id}-title`}>{props.title}</h2>
        {props.children}
        {props.reason ? (
          <div>
            <label for={`${id}-reason`}>{props.reason.label}</label>
            <textarea
              id={`${id}-reason`}
              required
              rows={3}
              maxLength={props.reason.max}
              value={reason}
              onInput={(e) => setReason((e.target as HTMLTextAreaElement).value)}
            />
          </div>
        ) : null}
        {props.typed !== undefined ? (
          <div>
            <label for={`${id}-typed`}>
              Type <code>{props.typed}</code> to confirm
            </label>
            <input
              id={`${id}-typed`}
              autocomplete="off"
              spellcheck={false}
              maxLength={props.typed.length + 10}
              value={typed}
              onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
            />
          </div>
        ) : null}
        <ErrorBox error={error} />
        <div class="actions">
          <button type="submit" class={props.danger ? 'danger' : undefined} disabled={!ready}>
            {props.confirmLabel}
          </button>
          <button type="button" class="secondary" onClick={() => ref.current?.close()}>
            Cancel
          </button>
        </div>
      </form>
    </dialog>
  );
}
