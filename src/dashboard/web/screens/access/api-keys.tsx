// API keys (#/api-keys): the account's keys.
import type { SessionInfo } from '../../api.ts';
import { Page } from '../../ui.tsx';
import { seg } from '../kit/text.ts';
import { KeysPanel } from './keys.tsx';

export function ApiKeysScreen(props: { session: SessionInfo }) {
  return (
    <Page title="API keys">
      <p class="muted">
        Each key does what its scopes allow, from the addresses its allow list names. The dashboard itself runs on the key you signed in with.
      </p>
      <KeysPanel path={`/accounts/${seg(props.session.account_id ?? '')}/api-keys`} session={props.session} caption="API keys" />
    </Page>
  );
}
