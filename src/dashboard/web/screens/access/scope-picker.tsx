// Choosing a key's scopes: a checkbox for every scope that names no domain (from the server's
// own scope table, so the two cannot drift), grouped by area, and a field for scopes of single
// domains (`messages:send:{example.com}`).
import { useId } from 'preact/hooks';
import { DOMAIN_FAMILIES, STATIC_SCOPES } from '../../../../accounts/scopes.ts';
import { items } from '../kit/text.ts';

const CHOICES: string[] = [...DOMAIN_FAMILIES.map((f) => `${f}:all`), ...STATIC_SCOPES];
const CHOICE_SET = new Set(CHOICES);

const AREAS: Array<{ label: string; prefix: string }> = [
  { label: 'Messages', prefix: 'messages:' },
  { label: 'Domains', prefix: 'domains:' },
  { label: 'Webhooks', prefix: 'webhooks:' },
  { label: 'Routes', prefix: 'routes:' },
  { label: 'SMTP credentials', prefix: 'smtp-credentials:' },
  { label: 'Statistics', prefix: 'statistics-transactional:' },
  { label: 'Suppressions', prefix: 'suppressions:' },
  { label: 'Account and members', prefix: 'accounts:' },
  { label: 'API keys', prefix: 'api-keys:' },
  { label: 'Sub-accounts', prefix: 'sub-accounts:' },
  { label: 'Sub-account API keys', prefix: 'sub-account-api-keys:' },
];

/** The scopes as the picker holds them: the ticked ones, and the others as typed. */
export interface ScopeChoice {
  ticked: Set<string>;
  other: string;
}

export function scopeChoiceOf(scopes: string[]): ScopeChoice {
  return { ticked: new Set(scopes.filter((s) => CHOICE_SET.has(s))), other: scopes.filter((s) => !CHOICE_SET.has(s)).join('\n') };
}

export function scopesOf(choice: ScopeChoice): string[] {
  return [...new Set([...CHOICES.filter((s) => choice.ticked.has(s)), ...items(choice.other)])];
}

export function ScopePicker(props: { value: ScopeChoice; onChange: (v: ScopeChoice) => void }) {
  const id = useId();
  const toggle = (scope: string, on: boolean) => {
    const ticked = new Set(props.value.ticked);
    if (on) ticked.add(scope);
    else ticked.delete(scope);
    props.onChange({ ...props.value, ticked });
  };
  return (
    <fieldset>
      <legend>Scopes</legend>
      <p class="hint">A key may grant only scopes it holds itself.</p>
      <div class="scope-groups">
        {AREAS.map((area) => (
          <fieldset key={area.prefix}>
            <legend>{area.label}</legend>
            {CHOICES.filter((s) => s.startsWith(area.prefix)).map((scope) => (
              <label class="check" key={scope}>
                <input type="checkbox" checked={props.value.ticked.has(scope)} onChange={(e) => toggle(scope, (e.target as HTMLInputElement).checked)} />
                <code>{scope}</code>
              </label>
            ))}
          </fieldset>
        ))}
      </div>
      <label for={`${id}-other`}>Scopes for single domains</label>
      <textarea
        id={`${id}-other`}
        rows={3}
        maxLength={8000}
        spellcheck={false}
        aria-describedby={`${id}-other-hint`}
        value={props.value.other}
        onInput={(e) => props.onChange({ ...props.value, other: (e.target as HTMLTextAreaElement).value })}
      />
      <p class="hint" id={`${id}-other-hint`}>
        One a line, for example <code>{'messages:send:{example.com}'}</code>.
      </p>
    </fieldset>
  );
}
