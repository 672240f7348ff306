/** omggif 1.0.10 ships no types: the reader part fennec uses (omggif.js GifReader). */
declare module "omggif" {
  export class GifReader {
    constructor(buf: Uint8Array);
    readonly width: number;
    readonly height: number;
    numFrames(): number;
    /** draws frame `frameNum` into `pixels` ([height][width][4]); transparent pixels are left as they were */
    decodeAndBlitFrameRGBA(frameNum: number, pixels: Uint8Array): void;
  }
  /** tests write GIFs with it: indexed pixels and a palette of 0xRRGGBB numbers (a power-of-two length) */
  export class GifWriter {
    constructor(buf: Uint8Array, width: number, height: number, options?: { palette?: number[]; loop?: number });
    addFrame(x: number, y: number, width: number, height: number, indexed: Uint8Array, options?: { palette?: number[]; delay?: number; transparent?: number }): number;
    end(): number;
  }
}
