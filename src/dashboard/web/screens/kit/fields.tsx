// Form fields with their labels and hints tied to them (for screen readers and getByLabel).
import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';
import './kit.css';

export function TextField(props: {
  label: string;
  value: string;
  onInput: (value: string) => void;
  type?: 'text' | 'url' | 'email' | 'datetime-local';
  required?: boolean;
  maxLength?: number;
  placeholder?: string;
  hint?: ComponentChildren;
  /** A textarea of this many rows. */
  rows?: number;
}) {
  const id = useId();
  const hint = props.hint ? `${id}-hint` : undefined;
  const common = {
    id,
    class: 'field-text',
    value: props.value,
    required: props.required,
    maxLength: props.maxLength,
    placeholder: props.placeholder,
    spellcheck: false,
    'aria-describedby': hint,
    onInput: (e: Event) => props.onInput((e.currentTarget as HTMLInputElement | HTMLTextAreaElement).value),
  };
  return (
    <div>
      <label for={id}>{props.label}</label>
      {props.rows ? <textarea rows={props.rows} {...common} /> : <input type={props.type ?? 'text'} autocomplete="off" {...common} />}
      {props.hint ? (
        <p id={hint} class="hint">
          {props.hint}
        </p>
      ) : null}
    </div>
  );
}

export function CheckField(props: { label: string; checked: boolean; onChange: (checked: boolean) => void; hint?: string }) {
  const id = useId();
  return (
    <div class="field-check">
      <input
        type="checkbox"
        id={id}
        checked={props.checked}
        aria-describedby={props.hint ? `${id}-hint` : undefined}
        onChange={(e) => props.onChange(e.currentTarget.checked)}
      />
      <label for={id}>{props.label}</label>
      {props.hint ? (
        <span id={`${id}-hint`} class="muted">
          {props.hint}
        </span>
      ) : null}
    </div>
  );
}

/** One of a few choices, as radio buttons in a fieldset named by its legend. */
export function RadioField<V extends string>(props: { legend: string; value: V; options: ReadonlyArray<readonly [V, string]>; onChange: (value: V) => void }) {
  const id = useId();
  return (
    <fieldset class="choices">
      <legend>{props.legend}</legend>
      {props.options.map(([value, label]) => (
        <div class="field-check" key={value}>
          <input type="radio" id={`${id}-${value}`} name={id} checked={props.value === value} onChange={() => props.onChange(value)} />
          <label for={`${id}-${value}`}>{label}</label>
        </div>
      ))}
    </fieldset>
  );
}
