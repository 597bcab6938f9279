/**
 * With delivery sources configured, outbound mail is filed under a lane: its source and its
 * destination, `<source>/<destination>` (a destination is an MX set, or a transport or smarthost
 * host), so that connection limits, rates and shaping count per source and destination, as
 * receivers count them. Without sources the lane is the destination alone, as before.
 */
export function laneOf(source: string | null | undefined, destination: string): string {
  return source ? `${source}/${destination}` : destination;
}

/** The source and destination of a lane name (no `/`: no source). */
export function splitLane(lane: string): { source: string | null; destination: string } {
  const at = lane.indexOf('/');
  // A URL origin (https://…) is an HTTP destination, never a lane.
  if (at <= 0 || lane.includes('://')) return { source: null, destination: lane };
  return { source: lane.slice(0, at), destination: lane.slice(at + 1) };
}
