// A secret the server gives once (an API key, an SMTP password, a webhook's or a route's signing
// secret): shown with a Copy button, said plainly that it cannot be shown again (only its hash is
// kept, or it is kept where no screen reads it).
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';
import { Copyable } from '../../ui.tsx';
import './kit.css';

export function ShownOnce(props: {
  heading: string;
  /** What the secret is, in a sentence and the Copy button's name ("password"). */
  what: string;
  value: string;
  children?: ComponentChildren;
  /** Offers "Done" (the secret leaves the page); without it, the secret stays until the page does. */
  onDone?: () => void;
}) {
  const id = useId();
  const heading = useRef<HTMLHeadingElement>(null);
  // Focus moves here so that a keyboard or screen-reader user meets the secret first.
  useEffect(() => heading.current?.focus(), []);
  return (
    <section class="card shown-once" aria-labelledby={id}>
      <h2 id={id} ref={heading} tabIndex={-1}>
        {props.heading}
      </h2>
      <p class="notice">
        This {props.what} is <strong>shown once</strong>: copy it now and keep it somewhere safe. It cannot be shown again.
      </p>
      <Copyable value={props.value} label={props.what} />
      {props.children}
      {props.onDone ? (
        <div class="actions">
          <button type="button" class="secondary" onClick={props.onDone}>
            Done
          </button>
        </div>
      ) : null}
    </section>
  );
}
