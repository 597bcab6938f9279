/** A MessageSummary as getMessages and getMessage answer it (the fields shown here). */
export interface MessageSummary {
  id: string | null;
  message_id: string;
  subject: string;
  sender: string;
  recipient: string;
  status: string;
  tags: string[];
  created_at: string;
  updated_at: string;
  sent_at: string | null;
  delivered_at: string | null;
  retain_until: string;
  direction: 'inbound' | 'outbound';
  bounce_classification: string;
  is_bounce_notification: boolean;
  delivery_attempts: Array<{ time: string; log: string; status: string }>;
  num_attempts: number;
  open_count: number;
  click_count: number;
}
