// MQTT 3.1.1 frames built by hand where a generic encoder costs more than the rest of the
// work (the load generator sends tens of thousands a second), and for tests that need bytes
// no well-behaved client would send.

/** The MQTT remaining-length varint. */
export function encodeLength(length: number): Buffer {
  const bytes: number[] = [];
  do {
    let byte = length % 128;
    length = Math.floor(length / 128);
    if (length > 0) byte |= 0x80;
    bytes.push(byte);
  } while (length > 0);
  return Buffer.from(bytes);
}

/** A topic as it sits in a PUBLISH: a 2-byte length, then its UTF-8 bytes. Encode once, reuse. */
export function encodedTopic(topic: string): Buffer {
  const bytes = Buffer.from(topic, 'utf8');
  const out = Buffer.allocUnsafe(bytes.length + 2);
  out.writeUInt16BE(bytes.length, 0);
  bytes.copy(out, 2);
  return out;
}

/** A QoS 1 PUBLISH (no DUP, no RETAIN) of `payload` on an encoded topic. */
export function publishFrame(topic: Buffer, packetId: number, payload: Buffer): Buffer {
  const remaining = topic.length + 2 + payload.length;
  const length = encodeLength(remaining);
  const frame = Buffer.allocUnsafe(1 + length.length + remaining);
  frame[0] = 0x32;
  let at = 1 + length.copy(frame, 1);
  at += topic.copy(frame, at);
  frame[at++] = packetId >> 8;
  frame[at++] = packetId & 0xff;
  payload.copy(frame, at);
  return frame;
}

export function pubackFrame(packetId: number): Buffer {
  return Buffer.from([0x40, 0x02, packetId >> 8, packetId & 0xff]);
}
