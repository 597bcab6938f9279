// A secret the server gives once (an API key, an SMTP password): shown with a Copy button until
// the person says they have it; only its hash is kept, so it cannot be shown again.
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';
import { Copyable } from '../../ui.tsx';
import './kit.css';

export function ShownOnce(props: { heading: string; what: string; value: string; children?: ComponentChildren; onDone: () => void }) {
  const id = useId();
  const heading = useRef<HTMLHeadingElement>(null);
  // Focus moves here so that a keyboard or screen-reader user meets the secret first.
  useEffect(() => heading.current?.focus(), []);
  return (
    <section class="card shown-once" aria-labelledby={id}>
      <h2 id={id} ref={heading} tabIndex={-1}>
        {props.heading}
      </h2>
      <p class="notice">This {props.what} is shown once: copy it now and keep it somewhere safe. It cannot be shown again.</p>
      <Copyable value={props.value} label={props.what} />
      {props.children}
      <div class="actions">
        <button type="button" class="secondary" onClick={props.onDone}>
          Done
        </button>
      </div>
    </section>
  );
}
