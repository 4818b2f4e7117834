// The primary host application's STATE (Sparkplug 3.0: retained JSON
// `{"online": boolean, "timestamp": ms}` on spBv1.0/STATE/{hostId}). A message older than the
// last one accepted is ignored, so a late retained `offline` cannot end a live session.
import { z } from 'zod';

const StateSchema = z.object({ online: z.boolean(), timestamp: z.number().int().nonnegative() });

/** STATE payloads are small: anything larger is not one. */
const MAX_STATE_BYTES = 1024;

export class HostState {
  private online = false;
  private lastTimestamp = -1;

  get isOnline(): boolean {
    return this.online;
  }

  /** Applies a STATE payload; returns the new online flag when it is accepted, undefined when ignored. */
  accept(payload: Buffer): boolean | undefined {
    if (payload.length > MAX_STATE_BYTES) return undefined;
    let parsed: z.infer<typeof StateSchema>;
    try {
      const result = StateSchema.safeParse(JSON.parse(payload.toString('utf8')));
      if (!result.success) return undefined;
      parsed = result.data;
    } catch {
      return undefined;
    }
    if (parsed.timestamp < this.lastTimestamp) return undefined;
    this.lastTimestamp = parsed.timestamp;
    this.online = parsed.online;
    return parsed.online;
  }
}
