// Image payloads recognised by their bytes, whole: a frame cut short, or a payload that only
// starts like an image, is refused with a reason.
import { describe, expect, it } from 'vitest';
import { imageFormat } from '../../bridge/intake/image.js';

const jpeg = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(100, 7), Buffer.from([0xff, 0xd9])]);
const png = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.alloc(50, 1),
  Buffer.from([0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]),
]);
function webp(extra = 0): Buffer {
  const body = Buffer.concat([Buffer.from('WEBPVP8 '), Buffer.alloc(40, 3)]);
  const head = Buffer.alloc(8);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(body.length + extra, 4);
  return Buffer.concat([head, body]);
}

describe('imageFormat', () => {
  it('recognises whole JPEG, PNG and WebP images', () => {
    expect(imageFormat(jpeg)).toEqual({ mime: 'image/jpeg' });
    expect(imageFormat(png)).toEqual({ mime: 'image/png' });
    expect(imageFormat(webp())).toEqual({ mime: 'image/webp' });
  });

  it('refuses images cut short, naming the format', () => {
    expect(imageFormat(jpeg.subarray(0, 60))).toEqual({ problem: 'JPEG is truncated: no end-of-image marker' });
    expect(imageFormat(png.subarray(0, 40))).toEqual({ problem: 'PNG is truncated: no IEND chunk at its end' });
    expect(imageFormat(webp(10))).toEqual({ problem: 'WebP is truncated: its RIFF size does not match' });
  });

  it('refuses what is no image at all', () => {
    expect(imageFormat(Buffer.from('{"id":"r1"}'))).toEqual({ problem: 'payload is not a JPEG, PNG or WebP image' });
    expect(imageFormat(Buffer.alloc(0))).toEqual({ problem: 'payload is not a JPEG, PNG or WebP image' });
  });
});
