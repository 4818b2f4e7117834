// Camera frames for device-sim's image mode (--images): the JPEG, PNG and WebP files of a
// folder, in name order, sent in turn; or generated frames, each different (so the bridge's
// cache does not flatter the run) and whole by the bridge's checks (JPEG start and end
// markers), which only the upstream simulator accepts: a real model needs real pictures.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../contract/index.js';

const IMAGE_FILE = /\.(jpe?g|png|webp)$/i;
const GENERATED_BYTES = 16_384;

export type FrameSource = (seq: number) => Buffer;

/** `generated`, or a folder holding at least one image file. */
export function frameSource(spec: string): FrameSource {
  if (spec === 'generated') return generatedFrame;
  let names: string[];
  try {
    names = readdirSync(spec)
      .filter((name) => IMAGE_FILE.test(name))
      .sort();
  } catch (err) {
    throw new UsageError(`--images: cannot read the folder "${spec}": ${err instanceof Error ? err.message : String(err)}`);
  }
  if (names.length === 0) throw new UsageError(`--images: no .jpg, .jpeg, .png or .webp file in "${spec}"`);
  const frames = names.map((name) => readFileSync(join(spec, name)));
  return (seq) => frames[seq % frames.length] as Buffer;
}

function generatedFrame(seq: number): Buffer {
  const frame = Buffer.alloc(GENERATED_BYTES, seq % 251);
  frame.set([0xff, 0xd8, 0xff, 0xe0], 0);
  frame.writeUInt32BE(seq >>> 0, 4);
  frame.set([0xff, 0xd9], GENERATED_BYTES - 2);
  return frame;
}
