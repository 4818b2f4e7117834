// Camera frames for tests: a small, whole JPEG (start and end markers around some bytes).
export const jpeg = (fill: number, size = 2000): Buffer =>
  Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(size, fill), Buffer.from([0xff, 0xd9])]);
