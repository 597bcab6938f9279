// A secret the server gives once (a webhook's or a route's signing secret): the value to copy,
// said plainly that it will not be shown again. Focus moves to it so nobody misses it.
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';
import { Copyable } from '../ui.tsx';
import './hooks.css';

export function SecretOnce(props: { title: string; value: string; children?: ComponentChildren }) {
  const id = useId();
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  return (
    <section class="card secret-once" aria-labelledby={id}>
      <h2 id={id} ref={heading} tabIndex={-1}>
        {props.title}
      </h2>
      <p>
        This secret is <strong>shown once</strong>: copy it now and keep it where your application checks the signature of each request. It cannot be shown
        again.
      </p>
      <Copyable value={props.value} label={props.title.toLowerCase()} />
      {props.children}
    </section>
  );
}
