// A form that sends one request: its heading, its fields, the error if the request was refused,
// and the submit and Cancel buttons. The submit button stays disabled while the request runs.
// Also the notice and error of a page's buttons that each send one request.
import type { ComponentChildren } from 'preact';
import { useId, useState } from 'preact/hooks';
import { ErrorBox, useAction } from '../../ui.tsx';
import './kit.css';

export function FormCard(props: {
  /** The form's h2 (and its accessible name); none when the page's h1 says it. */
  title?: string;
  submitLabel: string;
  /** Sends the request. A string returned is why it was not sent (shown like a refusal). */
  onSubmit: () => Promise<string | void>;
  onCancel: () => void;
  /** A card (a form that opens above a list) or the page's own form. */
  card?: boolean;
  children: ComponentChildren;
}) {
  const id = useId();
  const { busy, error, run } = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    return run(async () => {
      const refused = await props.onSubmit();
      if (refused) throw new Error(refused);
    });
  };
  return (
    <form class={props.card ? 'stack card' : 'stack'} onSubmit={(e) => void submit(e)} aria-labelledby={props.title ? `${id}-title` : undefined}>
      {props.title ? <h2 id={`${id}-title`}>{props.title}</h2> : null}
      {props.children}
      <ErrorBox error={error} />
      <div class="actions">
        <button type="submit" disabled={busy}>
          {props.submitLabel}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** What a change did, said where a screen reader hears it (the live region is there before the text). */
export function Notice(props: { text: string | null }) {
  return <div role="status">{props.text ? <p class="notice">{props.text}</p> : null}</div>;
}

/** A page's buttons that each make one request: one runs at a time, and says what it did or why not. */
export interface Actions {
  /** Runs `what`, which resolves to the sentence to say (null: say nothing). */
  act: (what: () => Promise<string | null>) => Promise<void>;
  busy: boolean;
  notice: string | null;
  setNotice: (text: string | null) => void;
  /** The notice and the error, where the page shows them. */
  status: ComponentChildren;
}

export function useActions(): Actions {
  const { busy, error, run } = useAction();
  const [notice, setNotice] = useState<string | null>(null);
  const act = async (what: () => Promise<string | null>) => {
    setNotice(null);
    await run(async () => setNotice(await what()));
  };
  return {
    act,
    busy,
    notice,
    setNotice,
    status: (
      <>
        <Notice text={notice} />
        <ErrorBox error={error} />
      </>
    ),
  };
}
